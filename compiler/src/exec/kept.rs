//! What a rank keeps of the messages some receives took: `source` (the rank its last
//! blocking receive from `any` got its message from) and the tag of its last `while
//! recv`. Both simulations set them when such a receive is matched, and read them at a
//! `source` peer and after a `while recv`.

use super::plan::P2pPlan;

/// What a posted receive sets once matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Keeps {
    /// A blocking receive from `any` on this communicator instance: its source.
    source_on: Option<u32>,
    /// The receive of a `while recv`: its tag.
    tag: bool,
}

impl Keeps {
    /// What the receive of `p`, on communicator instance `inst`, sets.
    #[inline]
    pub fn of(p: &P2pPlan, inst: u32) -> Keeps {
        Keeps {
            source_on: p.sets_source.then_some(inst),
            tag: p.sets_tag,
        }
    }
}

/// Why `source` names no rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoSource {
    /// No blocking receive from `any` of the rank has been matched yet.
    NoneYet,
    /// The last one was on another communicator instance.
    Elsewhere,
}

/// One rank's `source` and last `while recv` tag.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Kept {
    /// The communicator instance and the rank there.
    source: Option<(u32, u32)>,
    tag: Option<u32>,
}

impl Kept {
    /// A receive that `keeps` took a message from rank `src` (of its communicator)
    /// with `tag`.
    #[inline]
    pub fn matched(&mut self, keeps: Keeps, src: u32, tag: u32) {
        if let Some(inst) = keeps.source_on {
            self.source = Some((inst, src));
        }
        if keeps.tag {
            self.tag = Some(tag);
        }
    }

    /// The rank `source` names on communicator instance `inst`.
    #[inline]
    pub fn source(&self, inst: u32) -> Result<u32, NoSource> {
        match self.source {
            Some((on, src)) if on == inst => Ok(src),
            Some(_) => Err(NoSource::Elsewhere),
            None => Err(NoSource::NoneYet),
        }
    }

    /// Whether the message the last `while recv` took has `tag`: the loop goes on.
    #[inline]
    pub fn goes_on(&self, tag: u32) -> bool {
        self.tag == Some(tag)
    }
}
