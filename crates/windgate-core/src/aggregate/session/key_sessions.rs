//! The open sessions of one key, by start: a sorted vector while there are few (the common case, one or two
//! a key), a B-tree once there are many.
//!
//! A stream of millions of keys holds millions of these, most with one session: a vector of one costs one
//! small allocation, where a `BTreeMap` allocates a node of eleven entries (measured: 850 instructions a
//! new key, against the vector's ~100). A key with many open sessions (a long lateness bound over a short
//! gap) switches to the tree, so an out-of-order row never shifts more than [`FEW`] entries.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included};

/// Most sessions a key keeps in its vector.
const FEW: usize = 32;

/// An open session (its start is the key it is stored under).
#[derive(Debug, Clone, Copy)]
pub(super) struct Open {
    pub end: i64,
    pub slot: u32,
    /// The end under which the session was last queued to close (at most `end`).
    pub listed: i64,
}

#[derive(Debug)]
pub(super) enum KeySessions {
    /// Sorted by start, at most [`FEW`].
    Few(Vec<(i64, Open)>),
    Many(BTreeMap<i64, Open>),
}

impl Default for KeySessions {
    fn default() -> Self {
        KeySessions::Few(Vec::new())
    }
}

impl KeySessions {
    pub fn is_empty(&self) -> bool {
        match self {
            KeySessions::Few(v) => v.is_empty(),
            KeySessions::Many(m) => m.is_empty(),
        }
    }

    /// The session with the greatest start at or before `t`.
    pub fn at_or_before(&self, t: i64) -> Option<(i64, Open)> {
        match self {
            KeySessions::Few(v) => v[..v.partition_point(|&(s, _)| s <= t)].last().copied(),
            KeySessions::Many(m) => m.range(..=t).next_back().map(|(&s, &o)| (s, o)),
        }
    }

    /// Whether a session starts inside `(lo, hi]`.
    pub fn any_in(&self, lo: i64, hi: i64) -> bool {
        match self {
            KeySessions::Few(v) => v
                .get(v.partition_point(|&(s, _)| s <= lo))
                .is_some_and(|&(s, _)| s <= hi),
            KeySessions::Many(m) => m.range((Excluded(lo), Included(hi))).next().is_some(),
        }
    }

    /// Moves the sessions starting inside `(lo, hi]` to `out`, by start.
    pub fn take_in(&mut self, lo: i64, hi: i64, out: &mut Vec<(i64, Open)>) {
        match self {
            KeySessions::Few(v) => {
                let from = v.partition_point(|&(s, _)| s <= lo);
                let to = v.partition_point(|&(s, _)| s <= hi);
                out.extend(v.drain(from..to));
            }
            KeySessions::Many(m) => {
                let starts: Vec<i64> = m
                    .range((Excluded(lo), Included(hi)))
                    .map(|(&s, _)| s)
                    .collect();
                out.extend(
                    starts
                        .into_iter()
                        .map(|s| (s, m.remove(&s).expect("just listed"))),
                );
                self.shrink();
            }
        }
    }

    pub fn get_mut(&mut self, start: i64) -> Option<&mut Open> {
        match self {
            KeySessions::Few(v) => v
                .binary_search_by_key(&start, |&(s, _)| s)
                .ok()
                .map(|i| &mut v[i].1),
            KeySessions::Many(m) => m.get_mut(&start),
        }
    }

    pub fn remove(&mut self, start: i64) -> Option<Open> {
        let open = match self {
            KeySessions::Few(v) => {
                let i = v.binary_search_by_key(&start, |&(s, _)| s).ok()?;
                Some(v.remove(i).1)
            }
            KeySessions::Many(m) => m.remove(&start),
        };
        self.shrink();
        open
    }

    /// Adds a session starting at `start` (no session starts there).
    pub fn insert(&mut self, start: i64, open: Open) {
        match self {
            KeySessions::Few(v) if v.len() < FEW => {
                let i = v.partition_point(|&(s, _)| s < start);
                v.insert(i, (start, open));
            }
            KeySessions::Few(v) => {
                let mut m: BTreeMap<i64, Open> = v.drain(..).collect();
                m.insert(start, open);
                *self = KeySessions::Many(m);
            }
            KeySessions::Many(m) => {
                m.insert(start, open);
            }
        }
    }

    /// Every session, by start.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (i64, &Open)> + '_> {
        match self {
            KeySessions::Few(v) => Box::new(v.iter().map(|(s, o)| (*s, o))),
            KeySessions::Many(m) => Box::new(m.iter().map(|(s, o)| (*s, o))),
        }
    }

    /// A tree emptied goes back to an unallocated vector (memory follows the open sessions).
    fn shrink(&mut self) {
        if let KeySessions::Many(m) = self
            && m.is_empty()
        {
            *self = KeySessions::default();
        }
    }
}
