//! Message buffers: one shared send buffer (skeletons send zeros; MPI lets concurrent
//! sends read the same buffer) and one scratch receive buffer for blocking operations.
//! Nonblocking operations receive into their request's own buffer (`requests.rs`).
//!
//! Every buffer is a `Vec<f64>`, so it is aligned for both element types messages use:
//! bytes, and doubles for reductions whose size is a multiple of 8 (the sum of doubles
//! costs what an application's reduction costs; the sum of bytes would not).

use mpi::datatype::Equivalence;

/// An element type a message is made of.
pub trait Elem: Equivalence + Copy + 'static {
    const SIZE: usize;
}

impl Elem for u8 {
    const SIZE: usize = 1;
}

impl Elem for f64 {
    const SIZE: usize = 8;
}

/// `n` elements of `T` at the start of `words`, which must hold them.
pub(crate) fn view<T: Elem>(words: &[f64], n: usize) -> &[T] {
    assert!(n * T::SIZE <= words.len() * 8, "buffer too small");
    // SAFETY: the storage holds n * T::SIZE bytes (checked above), f64's alignment is
    // at least T's, and every bit pattern is a valid u8 or f64.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<T>(), n) }
}

/// `n` elements of `T` at the start of `words`, mutably.
pub(crate) fn view_mut<T: Elem>(words: &mut [f64], n: usize) -> &mut [T] {
    assert!(n * T::SIZE <= words.len() * 8, "buffer too small");
    // SAFETY: as in `view`; the borrow of `words` is exclusive.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<T>(), n) }
}

/// Makes sure `words` holds `bytes` bytes, growing it (zero-filled, so its pages are
/// touched now rather than inside a timed receive).
pub(crate) fn reserve(words: &mut Vec<f64>, bytes: u64) {
    let needed = usize::try_from(bytes.div_ceil(8)).unwrap_or(usize::MAX);
    if words.len() < needed {
        words.resize(needed, 0.0);
    }
}

#[derive(Debug, Default)]
pub(crate) struct Buffers {
    send: Vec<f64>,
    /// Send buffers replaced by larger ones while nonblocking sends may still read them.
    retired: Vec<Vec<f64>>,
    scratch: Vec<f64>,
}

impl Buffers {
    pub fn new(bytes: u64) -> Buffers {
        let mut buffers = Buffers::default();
        reserve(&mut buffers.send, bytes);
        reserve(&mut buffers.scratch, bytes);
        buffers
    }

    /// Grows the send buffer to `bytes`; the old one is kept alive, not freed, because a
    /// pending nonblocking send may still be reading it.
    fn grow_send(&mut self, bytes: u64) {
        if (self.send.len() as u64) * 8 < bytes {
            let mut larger = Vec::new();
            reserve(&mut larger, bytes.max(self.send.len() as u64 * 16));
            let old = std::mem::replace(&mut self.send, larger);
            if !old.is_empty() {
                self.retired.push(old);
            }
        }
    }

    /// `n` elements of `T` to send.
    pub fn send<T: Elem>(&mut self, n: usize) -> &[T] {
        self.grow_send((n * T::SIZE) as u64);
        view(&self.send, n)
    }

    /// `n_send` elements to send and `n_recv` to receive into, for blocking operations.
    pub fn pair<T: Elem>(&mut self, n_send: usize, n_recv: usize) -> (&[T], &mut [T]) {
        self.grow_send((n_send * T::SIZE) as u64);
        reserve(&mut self.scratch, (n_recv * T::SIZE) as u64);
        (
            view(&self.send, n_send),
            view_mut(&mut self.scratch, n_recv),
        )
    }

    /// `n` elements to receive into, for blocking operations.
    pub fn scratch<T: Elem>(&mut self, n: usize) -> &mut [T] {
        reserve(&mut self.scratch, (n * T::SIZE) as u64);
        view_mut(&mut self.scratch, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_and_growth() {
        let mut buffers = Buffers::new(20);
        assert_eq!(buffers.send.len(), 3);
        assert_eq!(buffers.send::<u8>(20).len(), 20);
        assert!(buffers.retired.is_empty());
        assert_eq!(buffers.send::<f64>(10).len(), 10);
        assert_eq!(buffers.retired.len(), 1);
        let (send, recv) = buffers.pair::<u8>(7, 100);
        assert_eq!((send.len(), recv.len()), (7, 100));
        assert!(send.iter().all(|&b| b == 0));
        assert_eq!(buffers.scratch::<f64>(13).len(), 13);
    }
}
