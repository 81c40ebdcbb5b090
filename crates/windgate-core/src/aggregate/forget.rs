//! Forgetting idle keys: how the single-threaded engines keep memory bounded by their open state when a
//! stream brings ever-new keys. Below the engines, so that they implement [`KeyHolder`] without importing
//! the engine enum that holds them.

use crate::keys::KeyDict;

/// Fewer keys than this are never forgotten: a dictionary this small costs well under a megabyte. Above it,
/// renumbering (a pass over the open state and the keys) runs only while most keys are idle (more than twice
/// the key entries of the open state), so each run is paid for by as many new keys and the cost per key stays
/// constant.
pub(super) const FORGET_MIN_KEYS: usize = 1 << 12;

/// An engine whose state names keys by dictionary id and can be renumbered between calls.
pub trait KeyHolder {
    /// How many (key, state) entries the open state holds: an upper bound on the keys in use.
    fn key_entries(&self) -> usize;
    /// Marks `live[key]` for every key with open state.
    fn mark_live_keys(&self, live: &mut [bool]);
    /// Renames key ids after the dictionary forgot keys (`remap[old]` is the new id).
    fn remap_keys(&mut self, remap: &[u32]);
}

/// Forgets the keys that hold no open state once they are most of the dictionary (and at least
/// [`FORGET_MIN_KEYS`]).
pub(super) fn forget_idle_keys(engine: &mut (impl KeyHolder + ?Sized), keys: &mut KeyDict) {
    let n = keys.len();
    if n < FORGET_MIN_KEYS || n <= 2 * engine.key_entries() {
        return;
    }
    let mut live = vec![false; n];
    engine.mark_live_keys(&mut live);
    engine.remap_keys(&keys.retain(&live));
}
