//! `compute .. polls N`: the application's failed tests and probes, made again (as
//! `ps_poll` in the C runtime). Each is an `MPI_Test` of a receive that never completes,
//! posted on `MPI_COMM_SELF` (which skeletons never use) at the first poll and cancelled
//! at the end, so each costs what a failed test costs the application with this MPI: a
//! turn of the progress engine, a system call with TCP, a yield where ranks share a core.

use std::mem::MaybeUninit;

use mpi::ffi;
use mpi::traits::*;

/// The receive the polls test.
pub(crate) struct Poller {
    request: Option<ffi::MPI_Request>,
    /// The receive's buffer: boxed, so it stays put while the receive is posted.
    buffer: Box<u8>,
}

impl Poller {
    pub fn new() -> Self {
        Poller {
            request: None,
            buffer: Box::new(0),
        }
    }

    /// Makes `n` failed polls.
    pub fn poll(&mut self, n: u64) {
        let request = match &mut self.request {
            Some(r) => r,
            None => {
                let mut r = MaybeUninit::<ffi::MPI_Request>::uninit();
                let ptr: *mut u8 = &mut *self.buffer;
                // SAFETY: the buffer is a boxed byte that lives (unmoved) until the
                // request is cancelled and completed in `end`; MPI writes the request.
                unsafe {
                    ffi::MPI_Irecv(
                        ptr.cast(),
                        1,
                        u8::equivalent_datatype().as_raw(),
                        0,
                        0,
                        ffi::RSMPI_COMM_SELF,
                        r.as_mut_ptr(),
                    );
                    self.request.insert(r.assume_init())
                }
            }
        };
        for _ in 0..n {
            let mut flag = 0;
            let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
            // SAFETY: a live request; MPI writes the flag and the status.
            unsafe {
                ffi::MPI_Test(request, &mut flag, status.as_mut_ptr());
            }
        }
    }

    /// Cancels the receive, if one was posted.
    pub fn end(&mut self) {
        if let Some(mut r) = self.request.take() {
            let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
            // SAFETY: a live request: cancelled, then completed.
            unsafe {
                ffi::MPI_Cancel(&mut r);
                ffi::MPI_Wait(&mut r, status.as_mut_ptr());
            }
        }
    }
}
