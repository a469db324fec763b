//! The C shim's interface (otf2/shim/psk_otf2.h), declared by hand: plain integers,
//! one record struct, opaque handles.

use std::os::raw::{c_char, c_int, c_void};

pub const N_ATTRS: usize = 6;

pub const DEF_CLOCK: u32 = 1;
pub const DEF_STRING: u32 = 2;
pub const DEF_ATTRIBUTE: u32 = 3;
pub const DEF_REGION: u32 = 4;
pub const DEF_SYSTEM_TREE_NODE: u32 = 5;
pub const DEF_LOCATION_GROUP: u32 = 6;
pub const DEF_LOCATION: u32 = 7;
pub const DEF_GROUP: u32 = 8;
pub const DEF_COMM: u32 = 9;
pub const DEF_LOCATION_PROPERTY: u32 = 10;
pub const DEF_CART_DIMENSION: u32 = 11;
pub const DEF_CART_TOPOLOGY: u32 = 12;
pub const DEF_SOURCE_CODE_LOCATION: u32 = 13;
pub const DEF_CALLING_CONTEXT: u32 = 14;
pub const EV_ENTER: u32 = 32;
pub const EV_LEAVE: u32 = 33;
pub const EV_SEND: u32 = 34;
pub const EV_ISEND: u32 = 35;
pub const EV_RECV: u32 = 36;
pub const EV_IRECV: u32 = 37;
pub const EV_ISEND_COMPLETE: u32 = 38;
pub const EV_IRECV_REQUEST: u32 = 39;
pub const EV_REQUEST_TEST: u32 = 40;
pub const EV_REQUEST_CANCELLED: u32 = 41;
pub const EV_COLLECTIVE_BEGIN: u32 = 42;
pub const EV_COLLECTIVE_END: u32 = 43;
pub const EV_COMM_CREATE: u32 = 44;
pub const EV_NB_COLL_REQUEST: u32 = 45;
pub const EV_NB_COLL_COMPLETE: u32 = 46;
pub const EV_CC_ENTER: u32 = 47;
pub const EV_CC_LEAVE: u32 = 48;

pub const GROUP_COMM_LOCATIONS: u64 = 1;
pub const GROUP_COMM_GROUP: u64 = 2;
pub const GROUP_COMM_SELF: u64 = 3;
pub const GROUP_LOCATIONS: u64 = 4;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawRec {
    pub kind: u32,
    pub n_members: u32,
    pub time: u64,
    pub v: [u64; 8],
    pub s: *const c_char,
    pub members: *const u64,
    pub has_attrs: u32,
    pub pad: u32,
    pub attrs: [u64; N_ATTRS],
}

impl RawRec {
    pub fn new(kind: u32, time: u64) -> Self {
        RawRec {
            kind,
            n_members: 0,
            time,
            v: [0; 8],
            s: std::ptr::null(),
            members: std::ptr::null(),
            has_attrs: 0,
            pad: 0,
            attrs: [0; N_ATTRS],
        }
    }
}

pub type RecCb = unsafe extern "C" fn(user: *mut c_void, rec: *const RawRec);

#[repr(C)]
pub struct Evts {
    _private: [u8; 0],
}

#[repr(C)]
pub struct Writer {
    _private: [u8; 0],
}

extern "C" {
    pub fn psk_otf2_read_defs(
        anchor: *const c_char,
        cb: RecCb,
        user: *mut c_void,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn psk_otf2_events_open(
        anchor: *const c_char,
        location: u64,
        attr_ids: *const u64,
        err: *mut c_char,
        len: usize,
    ) -> *mut Evts;
    pub fn psk_otf2_events_read(
        h: *mut Evts,
        max: u64,
        recs: *mut *const RawRec,
        n: *mut usize,
        read: *mut u64,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn psk_otf2_events_close(h: *mut Evts);
    pub fn psk_otf2_writer_open(
        dir: *const c_char,
        name: *const c_char,
        attr_ids: *const u64,
        err: *mut c_char,
        len: usize,
    ) -> *mut Writer;
    pub fn psk_otf2_write_event(
        w: *mut Writer,
        location: u64,
        rec: *const RawRec,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn psk_otf2_write_def(
        w: *mut Writer,
        rec: *const RawRec,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    pub fn psk_otf2_writer_close(w: *mut Writer, err: *mut c_char, len: usize) -> c_int;
    pub fn psk_otf2_collective_op(name: *const c_char) -> u64;
    #[cfg(test)]
    pub fn psk_otf2_rec_size() -> usize;
    #[cfg(test)]
    pub fn psk_otf2_undefined_u32() -> u32;
    #[cfg(test)]
    pub fn psk_otf2_undefined_u64() -> u64;
}

#[cfg(test)]
mod tests {
    /// The record as declared here is the shim's.
    #[test]
    fn the_record_is_declared_as_the_shim_has_it() {
        // SAFETY: a function without arguments returning a constant.
        assert_eq!(
            unsafe { super::psk_otf2_rec_size() },
            std::mem::size_of::<super::RawRec>()
        );
    }

    /// The crate's "undefined" values are the library's.
    #[test]
    fn undefined_values_are_the_library_s() {
        // SAFETY: functions without arguments returning constants.
        assert_eq!(
            unsafe { super::psk_otf2_undefined_u32() },
            crate::UNDEFINED_U32
        );
        assert_eq!(
            unsafe { super::psk_otf2_undefined_u64() },
            crate::UNDEFINED_U64
        );
    }
}
