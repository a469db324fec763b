//! Request handles: `req NAME = isend ...` binds a named handle ([`Req`]) that `wait`,
//! `waitall`, `waitany` and `test` complete later, possibly in another block or loop
//! iteration. rsmpi ties a request to a lexical scope; a skeleton's handles outlive any
//! scope, so the runtime keeps each handle's raw `MPI_Request` in a slot together with
//! the buffer it receives into, and completes requests with the MPI calls themselves.

use std::collections::VecDeque;
use std::mem::MaybeUninit;

use mpi::ffi;

use crate::skeleton::{fatal, Skeleton};

/// A request handle, declared with [`Skeleton::request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Req(pub(crate) usize);

pub(crate) struct Slot {
    pub name: String,
    pub raw: ffi::MPI_Request,
    /// What the pending operation receives into; never reallocated while it is pending.
    pub buf: Vec<f64>,
    /// Counts and displacements of a pending `v` collective, which MPI reads until the
    /// operation completes.
    pub counts: [Vec<i32>; 4],
    /// `window W` (0: none): the handle keeps up to W operations in flight; the older
    /// ones wait in `flight` (oldest first) with their buffers, and the buffers of
    /// completed ones in `spare` for the next posts.
    window: usize,
    flight: VecDeque<(ffi::MPI_Request, Vec<f64>)>,
    spare: Vec<Vec<f64>>,
}

impl Slot {
    /// Completes the operation in flight longest.
    fn complete_oldest(&mut self) {
        if let Some((mut raw, buf)) = self.flight.pop_front() {
            // SAFETY: `raw` is an active request of this process (or null, which MPI
            // ignores); its buffer is kept until it completes.
            unsafe {
                ffi::MPI_Wait(&mut raw, ffi::RSMPI_STATUS_IGNORE);
            }
            self.spare.push(buf);
        }
    }

    /// Completes every older operation of a windowed handle.
    fn complete_flight(&mut self) {
        while !self.flight.is_empty() {
            self.complete_oldest();
        }
    }
}

fn null() -> ffi::MPI_Request {
    // SAFETY: reading a constant the MPI library initializes.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

fn is_null(raw: ffi::MPI_Request) -> bool {
    raw == null()
}

#[derive(Default)]
pub(crate) struct Requests {
    slots: Vec<Slot>,
}

impl Requests {
    pub fn add(&mut self, name: &str, window: usize) -> Req {
        self.slots.push(Slot {
            name: name.to_string(),
            raw: null(),
            buf: Vec::new(),
            counts: Default::default(),
            window,
            flight: VecDeque::new(),
            spare: Vec::new(),
        });
        Req(self.slots.len() - 1)
    }

    /// The slot of `req`, which must not have an operation pending (a windowed handle's
    /// pending operation joins its operations in flight).
    pub fn for_post(&mut self, req: Req) -> &mut Slot {
        let slot = self.slot(req);
        if slot.window > 0 && !is_null(slot.raw) {
            let buf = slot.spare.pop().unwrap_or_default();
            let older = (
                std::mem::replace(&mut slot.raw, null()),
                std::mem::replace(&mut slot.buf, buf),
            );
            slot.flight.push_back(older);
        }
        if !is_null(slot.raw) {
            let name = slot.name.clone();
            fatal(&format!(
                "request `{name}` is started again before it was completed"
            ));
        }
        slot
    }

    fn slot(&mut self, req: Req) -> &mut Slot {
        match self.slots.get_mut(req.0) {
            Some(slot) => slot,
            None => fatal(&format!("request {} does not exist", req.0)),
        }
    }

    /// After a post: a windowed handle with more than its window in flight completes
    /// the oldest.
    pub fn trim(&mut self, req: Req) {
        let slot = self.slot(req);
        while slot.window > 0 && slot.flight.len() + usize::from(!is_null(slot.raw)) > slot.window {
            slot.complete_oldest();
        }
    }

    /// Names of the handles with an operation pending.
    pub fn pending_names(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter(|s| !is_null(s.raw) || !s.flight.is_empty())
            .map(|s| s.name.clone())
            .collect()
    }

    pub fn clear(&mut self) {
        self.slots.retain(|s| !is_null(s.raw));
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        // A request still pending (the program is failing) may write into its buffer
        // later: leak the buffer rather than free memory MPI may still use.
        for slot in self.slots.drain(..) {
            if !is_null(slot.raw) {
                std::mem::forget(slot.buf);
            }
            for (_, buf) in slot.flight {
                std::mem::forget(buf);
            }
        }
    }
}

impl Skeleton {
    /// Declares a request handle called `name` (the name is used in error messages).
    pub fn request(&mut self, name: &str) -> Req {
        self.requests.add(name, 0)
    }

    /// Declares a request handle that keeps up to `window` operations in flight
    /// (`req NAME = isend ... window W`).
    pub fn window_request(&mut self, name: &str, window: usize) -> Req {
        self.requests.add(name, window.max(1))
    }

    /// `wait h`: completes `h`'s operation (at once if none is pending), and every
    /// operation a windowed handle has in flight.
    pub fn wait(&mut self, req: Req) {
        let slot = self.requests.slot(req);
        slot.complete_flight();
        if !is_null(slot.raw) {
            // SAFETY: `raw` is an active request of this process; MPI sets it to null.
            unsafe {
                ffi::MPI_Wait(&mut slot.raw, ffi::RSMPI_STATUS_IGNORE);
            }
        }
    }

    /// `waitall h1, h2, ...`
    pub fn waitall(&mut self, reqs: &[Req]) {
        for &r in reqs {
            self.requests.slot(r).complete_flight();
        }
        let mut raws: Vec<ffi::MPI_Request> =
            reqs.iter().map(|&r| self.requests.slot(r).raw).collect();
        // SAFETY: every entry is an active request or MPI_REQUEST_NULL, which MPI ignores.
        unsafe {
            ffi::MPI_Waitall(
                raws.len() as i32,
                raws.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            );
        }
        for (&r, raw) in reqs.iter().zip(raws) {
            self.requests.slot(r).raw = raw;
        }
    }

    /// `waitany h1, h2, ...`: completes one operation (MPI chooses which, among those
    /// that are done) and returns its position in `reqs`, or `None` when none was
    /// pending.
    pub fn waitany(&mut self, reqs: &[Req]) -> Option<usize> {
        let mut raws: Vec<ffi::MPI_Request> =
            reqs.iter().map(|&r| self.requests.slot(r).raw).collect();
        let mut index: i32 = -1;
        // SAFETY: as in `waitall`.
        unsafe {
            ffi::MPI_Waitany(
                raws.len() as i32,
                raws.as_mut_ptr(),
                &mut index,
                ffi::RSMPI_STATUS_IGNORE,
            );
        }
        for (&r, raw) in reqs.iter().zip(raws) {
            self.requests.slot(r).raw = raw;
        }
        usize::try_from(index).ok().filter(|&i| i < reqs.len())
    }

    /// `test h`: probes once; returns whether the operation has completed (a handle with
    /// nothing pending counts as completed).
    pub fn test(&mut self, req: Req) -> bool {
        let slot = self.requests.slot(req);
        if is_null(slot.raw) {
            return true;
        }
        let mut flag: i32 = 0;
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: `raw` is active; MPI writes the flag and the status.
        unsafe {
            ffi::MPI_Test(&mut slot.raw, &mut flag, status.as_mut_ptr());
        }
        flag != 0
    }
}
