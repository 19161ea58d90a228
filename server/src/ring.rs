//! The replay ring: the newest events as ready JSON, bounded in bytes, for SSE clients that
//! reconnect with `Last-Event-ID` or fall behind.
//!
//! Each event is kept once, as its `{type, properties}` JSON (the stream flavours wrap it on
//! the way out). A part's newer whole state (`message.part.updated`) replaces its older one and
//! the deltas before it: they are superseded, so a long reply keeps only its latest whole state
//! here, plus the deltas after it. Replaying from any id the ring covers is still faithful for
//! a client that draws parts from their whole updates and extends them with deltas: for each
//! part it gets either the deltas that follow the state it has, or the newest whole state and
//! the deltas after it. Only eviction (the byte bound) and events the log lost make an id too
//! old: such a client is told to resync.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use taskforce_agents::id::PartId;

/// What an entry costs beyond its JSON (map node, shared frame, bookkeeping), for the bound.
const ENTRY_OVERHEAD: usize = 96;

/// One event as kept and sent: its number and its `{type, properties}` JSON.
#[derive(Debug)]
pub struct Frame {
    /// The bus sequence number (the `<seq>` of the frame's `id: <epoch>-<seq>`).
    pub seq: u64,
    /// The event as `{type, properties}` JSON, on one line.
    pub payload: Bytes,
}

/// How an event concerns a part, for replacement.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// The part's whole state: it supersedes the part's earlier states and deltas.
    Whole(PartId),
    /// Text appended to the part.
    Delta(PartId),
    /// Anything else: kept until evicted.
    Other,
}

struct Entry {
    frame: Arc<Frame>,
    part: Option<PartId>,
}

/// The entries of one part in the ring: its whole state, if kept, and the deltas after it.
#[derive(Default)]
struct PartEntries {
    whole: Option<u64>,
    deltas: VecDeque<u64>,
}

impl PartEntries {
    fn is_empty(&self) -> bool {
        self.whole.is_none() && self.deltas.is_empty()
    }
}

/// What a client reading after some id gets.
#[derive(Debug)]
pub enum After {
    /// The next frames, oldest first (none: it is up to date).
    Frames(Vec<Arc<Frame>>),
    /// Events after its id are no longer all kept: it must resync.
    Behind,
}

/// The bounded, replacing store of recent frames.
pub struct Ring {
    entries: BTreeMap<u64, Entry>,
    parts: HashMap<PartId, PartEntries>,
    bytes: usize,
    max_bytes: usize,
    /// The newest sequence number seen (0: none yet).
    last: u64,
    /// Events up to this number may be missing (evicted, or never seen by the log): a client
    /// whose last event is older cannot be replayed faithfully.
    complete_after: u64,
}

impl Ring {
    /// An empty ring keeping at most `max_bytes` of frames.
    pub fn new(max_bytes: usize) -> Ring {
        Ring::starting_after(max_bytes, 0)
    }

    /// An empty ring for events numbered after `seq` (a cluster's stream, read from there):
    /// ids up to `seq` are not covered.
    pub fn starting_after(max_bytes: usize, seq: u64) -> Ring {
        Ring {
            entries: BTreeMap::new(),
            parts: HashMap::new(),
            bytes: 0,
            max_bytes,
            last: seq,
            complete_after: seq,
        }
    }

    /// The newest sequence number seen (0: none yet).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// How many bytes the kept frames cost.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many frames are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether every event after `seq` can be replayed faithfully.
    pub fn covers(&self, seq: u64) -> bool {
        seq >= self.complete_after && seq <= self.last
    }

    /// Keeps event `seq` (`payload` is its JSON), replacing what it supersedes and evicting the
    /// oldest frames beyond the byte bound (the newest stays, even alone beyond it). Numbers must grow: an older or repeated one is
    /// ignored, and a jump means the log missed events (nobody older can be replayed).
    pub fn push(&mut self, seq: u64, payload: Bytes, role: Role) -> Option<Arc<Frame>> {
        if seq <= self.last {
            return None;
        }
        // Events the log never saw: nothing before them is replayable. (Before the first event
        // there is nothing: a reader at 0 joined before it and reads from it on.)
        if self.last != 0 && seq != self.last + 1 {
            self.clear();
            self.complete_after = seq - 1;
        }
        self.last = seq;
        let part = match role {
            Role::Whole(id) => {
                if let Some(old) = self.parts.remove(&id) {
                    for superseded in old.whole.into_iter().chain(old.deltas) {
                        self.remove(superseded);
                    }
                }
                self.parts.insert(
                    id.clone(),
                    PartEntries {
                        whole: Some(seq),
                        deltas: VecDeque::new(),
                    },
                );
                Some(id)
            }
            Role::Delta(id) => {
                self.parts
                    .entry(id.clone())
                    .or_default()
                    .deltas
                    .push_back(seq);
                Some(id)
            }
            Role::Other => None,
        };
        let frame = Arc::new(Frame { seq, payload });
        self.bytes += cost(&frame);
        self.entries.insert(
            seq,
            Entry {
                frame: frame.clone(),
                part,
            },
        );
        // The newest frame stays even alone beyond the bound: live clients still get it.
        while self.bytes > self.max_bytes && self.entries.len() > 1 {
            let Some((evicted, entry)) = self.entries.pop_first() else {
                break;
            };
            self.bytes -= cost(&entry.frame);
            self.forget(evicted, entry.part.as_ref());
            self.complete_after = self.complete_after.max(evicted);
        }
        Some(frame)
    }

    /// At most `limit` frames after `seq`, oldest first, or [`After::Behind`] when some of
    /// them are gone.
    pub fn after(&self, seq: u64, limit: usize) -> After {
        if seq < self.complete_after {
            return After::Behind;
        }
        After::Frames(
            self.entries
                .range(seq + 1..)
                .take(limit)
                .map(|(_, e)| e.frame.clone())
                .collect(),
        )
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.parts.clear();
        self.bytes = 0;
    }

    /// Removes a superseded entry (its part's bookkeeping is the caller's).
    fn remove(&mut self, seq: u64) {
        if let Some(entry) = self.entries.remove(&seq) {
            self.bytes -= cost(&entry.frame);
        }
    }

    /// Drops an evicted entry from its part's bookkeeping.
    fn forget(&mut self, seq: u64, part: Option<&PartId>) {
        let Some(id) = part else {
            return;
        };
        if let Some(entries) = self.parts.get_mut(id) {
            if entries.whole == Some(seq) {
                entries.whole = None;
            } else if entries.deltas.front() == Some(&seq) {
                entries.deltas.pop_front();
            }
            if entries.is_empty() {
                self.parts.remove(id);
            }
        }
    }
}

fn cost(frame: &Frame) -> usize {
    frame.payload.len() + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(after: After) -> Vec<u64> {
        match after {
            After::Frames(frames) => frames.iter().map(|f| f.seq).collect(),
            After::Behind => panic!("behind"),
        }
    }

    fn text(n: usize) -> Bytes {
        Bytes::from("x".repeat(n))
    }

    #[test]
    fn a_newer_whole_part_replaces_its_older_states_and_the_deltas_before_it() {
        let (p, q) = (PartId::new(), PartId::new());
        let mut ring = Ring::new(1 << 20);
        ring.push(1, text(10), Role::Other);
        ring.push(2, text(10), Role::Whole(p.clone()));
        ring.push(3, text(1), Role::Delta(p.clone()));
        ring.push(4, text(10), Role::Whole(q.clone()));
        ring.push(5, text(1), Role::Delta(p.clone()));
        ring.push(6, text(20), Role::Whole(p.clone()));
        ring.push(7, text(1), Role::Delta(p.clone()));
        // The part's first state and its deltas before the newest state are gone; the other
        // part and the other event stay.
        assert_eq!(seqs(ring.after(0, 100)), [1, 4, 6, 7]);
        assert_eq!(ring.bytes(), 10 + 10 + 20 + 1 + 4 * ENTRY_OVERHEAD);
        // Every id the ring has seen still replays (what it gets supersedes what it missed).
        for seen in 0..=7 {
            assert!(ring.covers(seen), "{seen}");
        }
        assert_eq!(seqs(ring.after(3, 100)), [4, 6, 7]);
        assert_eq!(seqs(ring.after(6, 100)), [7]);
        assert_eq!(seqs(ring.after(7, 100)), Vec::<u64>::new());
        assert_eq!(seqs(ring.after(0, 2)), [1, 4]);
    }

    #[test]
    fn the_ring_keeps_at_most_its_bytes_and_an_evicted_id_must_resync() {
        let mut ring = Ring::new(10 * (100 + ENTRY_OVERHEAD));
        for seq in 1..=25 {
            ring.push(seq, text(100), Role::Other);
            assert!(ring.bytes() <= 10 * (100 + ENTRY_OVERHEAD));
        }
        assert_eq!(ring.len(), 10);
        assert_eq!(seqs(ring.after(15, 100)), (16..=25).collect::<Vec<_>>());
        assert!(matches!(ring.after(14, 100), After::Behind));
        assert!(!ring.covers(14));
        assert!(ring.covers(15));
        // An id the ring never gave out is not covered either.
        assert!(!ring.covers(26));
    }

    #[test]
    fn a_long_reply_keeps_one_whole_state_and_the_deltas_after_it() {
        let p = PartId::new();
        let mut ring = Ring::new(1 << 20);
        let mut seq = 0;
        let mut reply = 0;
        // A 100 KB reply in 1,000 deltas with its whole state every 100 deltas: the states grow.
        for n in 1..=1_000 {
            seq += 1;
            reply += 100;
            ring.push(seq, text(100), Role::Delta(p.clone()));
            if n % 100 == 0 {
                seq += 1;
                ring.push(seq, text(reply), Role::Whole(p.clone()));
            }
        }
        seq += 1;
        ring.push(seq, text(reply), Role::Whole(p.clone()));
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.bytes(), reply + ENTRY_OVERHEAD);
    }

    #[test]
    fn a_whole_state_larger_than_the_bound_is_kept_alone_until_the_next_event() {
        let mut ring = Ring::new(1_000);
        ring.push(1, text(10), Role::Other);
        ring.push(2, text(5_000), Role::Whole(PartId::new()));
        assert_eq!(seqs(ring.after(1, 100)), [2]);
        assert_eq!(ring.len(), 1);
        ring.push(3, text(10), Role::Other);
        assert_eq!(seqs(ring.after(2, 100)), [3]);
        assert!(matches!(ring.after(1, 100), After::Behind));
    }

    #[test]
    fn events_the_log_never_saw_make_older_ids_resync() {
        let mut ring = Ring::new(1 << 20);
        // A reader that joined before the first event reads from it on, whatever its number.
        ring.push(5, text(10), Role::Other);
        assert_eq!(seqs(ring.after(0, 100)), [5]);
        ring.push(6, text(10), Role::Other);
        // 7 and 8 were lost.
        ring.push(9, text(10), Role::Other);
        assert!(matches!(ring.after(6, 100), After::Behind));
        assert_eq!(seqs(ring.after(8, 100)), [9]);
        // Repeated or older numbers change nothing.
        assert!(ring.push(9, text(10), Role::Other).is_none());
        assert_eq!(ring.len(), 1);
    }
}
