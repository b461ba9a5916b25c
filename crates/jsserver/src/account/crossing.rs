//! The bound on every way from one account into another.
//!
//! Imports join the accounts' routers into a graph that may have loops (an account importing
//! its own export, two accounts importing from each other; nats-server starts with some of
//! them, see [`crate::auth::accounts`]). Each step along an import is a [`Crossing`]: an
//! interest check asking the other account (a [`super::imports::StreamImport`] or
//! [`super::imports::ServiceImport`] counts as interest only while the other side has some),
//! or a message carried over (a stream, a request, a response). A thread is never inside
//! the same import twice (the second step is a loop: no interest, nothing carried, as
//! nats-server drops a message coming back to a service export it already passed), nor
//! inside more than [`MAX_CROSSINGS`] at once, however the steps nest: through a message's
//! own imports, or through a message the server publishes while handling another (a
//! JetStream delivery, a system account answer).
//!
//! Steps are synchronous: an interest check or a routed message finishes before the
//! publisher's call returns, so the thread's own stack of crossings is the path.

#[cfg(test)]
use std::cell::Cell;
use std::cell::RefCell;
use std::marker::PhantomData;

/// The most crossings one thread is inside at once: a message carried by one import, its
/// response on the way back, and a few more levels of server-published messages taking
/// imports in turn. Deeper than any useful set-up, far below what would use up a thread's
/// stack.
pub const MAX_CROSSINGS: usize = 16;

thread_local! {
    /// The imports this thread is inside now, innermost last (each by the address of its
    /// handler).
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// For tests: what this thread did since [`Crossing::take_counts`].
    static SEEN: Cell<Counts> = const { Cell::new(Counts::NONE) };
}

/// For tests: what [`Crossing::take_counts`] reports.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// The most crossings the thread was inside at once.
    pub deepest: usize,
    /// How many it entered.
    pub entered: u64,
    /// The lowest stack address it entered one at (`usize::MAX`: none).
    pub lowest: usize,
    /// How many steps it refused or found refused ([`Crossing::open`]): a loop, or too
    /// deep.
    pub refused: u64,
}

#[cfg(test)]
impl Counts {
    const NONE: Counts = Counts {
        deepest: 0,
        entered: 0,
        lowest: usize::MAX,
        refused: 0,
    };
}

#[cfg(test)]
fn count_refusal() {
    SEEN.with(|seen| {
        let mut c = seen.get();
        c.refused += 1;
        seen.set(c);
    });
}

/// Being inside one import, until dropped. Not `Send`: it is the calling thread's.
#[must_use = "the crossing ends when this is dropped"]
pub struct Crossing {
    id: usize,
    _thread: PhantomData<*const ()>,
}

impl Crossing {
    /// Enters the import `id` (its handler's address); `None` when this thread is already
    /// inside it or inside [`MAX_CROSSINGS`] imports: the step is not taken.
    pub fn enter(id: usize) -> Option<Crossing> {
        INSIDE.with(|inside| {
            let mut inside = inside.borrow_mut();
            if inside.len() >= MAX_CROSSINGS || inside.contains(&id) {
                #[cfg(test)]
                count_refusal();
                return None;
            }
            inside.push(id);
            #[cfg(test)]
            {
                let depth = inside.len();
                let here = std::ptr::from_ref(&depth) as usize;
                SEEN.with(|seen| {
                    let c = seen.get();
                    seen.set(Counts {
                        deepest: c.deepest.max(depth),
                        entered: c.entered + 1,
                        lowest: c.lowest.min(here),
                        ..c
                    });
                });
            }
            Some(Crossing {
                id,
                _thread: PhantomData,
            })
        })
    }

    /// Whether [`Crossing::enter`] would take the step now.
    pub fn open(id: usize) -> bool {
        let open = INSIDE.with(|inside| {
            let inside = inside.borrow();
            inside.len() < MAX_CROSSINGS && !inside.contains(&id)
        });
        #[cfg(test)]
        if !open {
            count_refusal();
        }
        open
    }

    /// For tests: this thread's [`Counts`] since the last call; resets them.
    #[cfg(test)]
    pub fn take_counts() -> Counts {
        SEEN.with(|seen| seen.replace(Counts::NONE))
    }
}

impl Drop for Crossing {
    fn drop(&mut self) {
        INSIDE.with(|inside| {
            let mut inside = inside.borrow_mut();
            if let Some(at) = inside.iter().rposition(|&id| id == self.id) {
                inside.remove(at);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_import_twice_or_too_deep_is_refused() {
        let a = Crossing::enter(1).expect("first");
        assert!(Crossing::enter(1).is_none(), "a loop");
        assert!(!Crossing::open(1));
        let nested: Vec<_> = (2..=MAX_CROSSINGS)
            .map(|id| Crossing::enter(id).expect("within the bound"))
            .collect();
        assert!(Crossing::enter(1000).is_none(), "too deep");
        drop(nested);
        assert!(Crossing::open(1000));
        drop(a);
        assert!(Crossing::open(1));
        let counts = Crossing::take_counts();
        assert_eq!(
            (counts.deepest, counts.entered),
            (MAX_CROSSINGS, MAX_CROSSINGS as u64)
        );
    }
}
