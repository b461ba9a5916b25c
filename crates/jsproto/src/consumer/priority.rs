//! Priority groups (ADR-42, nats-server 2.11+): which waiting pull request a message goes to
//! when the consumer has a `priority_policy`, the checks a request's group fields pass on
//! arrival, and the pin of a `pinned_client` consumer.
//!
//! Without a policy none of this runs: the head of the line is served, at no extra cost.
//! With one, the line is walked in order for each delivery (O(waiting)) and the first request
//! the policy allows is served:
//!
//! * `overflow`: a request with `min_pending` / `min_ack_pending` is passed over unless
//!   `num_pending` (counting the message at hand) reaches `min_pending` or `num_ack_pending`
//!   (before it) reaches `min_ack_pending`, as nats-server's `nextWaiting`;
//! * `pinned_client`: with no pin, the first request without an `id` gets a new pin (its
//!   deliveries carry it in `Nats-Pin-Id`); with a pin, only requests carrying it are
//!   served, those without an id wait, and those with another id are ended with
//!   `423 Nats-Wrong-Pin-Id`;
//! * `prioritized`: the line itself is ordered by priority ([`Waiting`] ranks), so the head
//!   is the answer.

use std::sync::Arc;
use std::time::Duration;

use super::config::PriorityPolicy;
use super::pull::{PriorityGroup, PullStatus};
use super::waiting::{Request, Waiting};

/// The rank of a request without a priority on a `prioritized` consumer: after 0–9.
const NO_PRIORITY_RANK: u8 = 10;

/// The current pin of a `pinned_client` consumer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Pin {
    /// The pin id (22 characters of `[0-9A-Za-z]`, the shape of nats-server's nuid).
    pub id: Arc<str>,
    /// The group it was given in.
    pub group: String,
    /// When it was given, in ticks (`pinned_ts` in consumer info).
    pub since: u64,
    /// When it runs out unless a request with its id arrives first, in ticks.
    pub expires_at: u64,
}

/// Makes pin ids: deterministic for a seed, so that two replicas given the same seed and the
/// same commands hand out the same ids.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PinIds {
    seed: u64,
    made: u64,
}

impl PinIds {
    pub fn reseed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// The next id: 22 base-62 characters from two SplitMix64 outputs.
    pub fn next(&mut self) -> Arc<str> {
        const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut id = String::with_capacity(22);
        for half in 0..2u64 {
            self.made += 1;
            let mut x = splitmix64(self.seed ^ self.made.wrapping_mul(2).wrapping_add(half));
            for _ in 0..11 {
                id.push(DIGITS[(x % 62) as usize] as char);
                x /= 62;
            }
        }
        id.into()
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Checks a request's group fields on arrival, in nats-server's order
/// (`processNextMsgRequest`): overflow fields on another policy, an `id` on another policy, a
/// priority outside 0–9 (any consumer); then, with a policy, a missing or unknown group and an
/// `id` other than the current pin (`423`). A matching `id` extends the pin by `ttl` from `now`.
pub(crate) fn check_request(
    policy: PriorityPolicy,
    groups: &[String],
    pin: Option<&mut Pin>,
    group: &PriorityGroup,
    now: u64,
) -> Result<(), PullStatus> {
    if (group.min_pending != 0 || group.min_ack_pending != 0) && policy != PriorityPolicy::Overflow
    {
        return Err(PullStatus::NotOverflowConsumer);
    }
    if !group.id.is_empty() && !matches!(policy, PriorityPolicy::PinnedClient { .. }) {
        return Err(PullStatus::NotPinnedConsumer);
    }
    if !(0..=9).contains(&group.priority) {
        return Err(PullStatus::PriorityOutOfRange);
    }
    if policy == PriorityPolicy::None {
        return Ok(());
    }
    if group.group.is_empty() {
        return Err(PullStatus::PriorityGroupMissing);
    }
    if !groups.contains(&group.group) {
        return Err(PullStatus::InvalidPriorityGroup);
    }
    if let (Some(pin), PriorityPolicy::PinnedClient { ttl }) = (pin, policy) {
        if *pin.id == *group.id {
            pin.expires_at = now.saturating_add(ns(ttl));
        } else if !group.id.is_empty() {
            return Err(PullStatus::PinIdMismatch);
        }
    }
    Ok(())
}

/// Fills in what a queued request keeps of its group fields: nothing without a policy; the
/// fields, and for `prioritized` its place class.
pub(crate) fn classify(policy: PriorityPolicy, group: Option<PriorityGroup>, req: &mut Request) {
    if policy == PriorityPolicy::None {
        return;
    }
    if policy == PriorityPolicy::Prioritized {
        req.rank = group
            .as_ref()
            .map_or(NO_PRIORITY_RANK, |g| g.priority.clamp(0, 9) as u8);
    }
    req.group = group.map(Box::new);
}

/// The consumer's numbers the `overflow` thresholds are checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backlog {
    /// `num_pending` counting the message about to be delivered (nats-server's `npc + 1`).
    pub num_pending: u64,
    /// `num_ack_pending` before this delivery.
    pub num_ack_pending: u64,
}

/// A request chosen by [`choose`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chosen {
    pub id: u64,
    /// The request carries no pin id and the consumer has no pin: delivering to it pins it.
    pub takes_pin: bool,
}

/// The request the next message goes to under `policy`, or `None` when none may take it now.
/// Requests found holding a stale pin id on the way are removed and answered with
/// `423 Nats-Wrong-Pin-Id` (into `ended`).
pub(crate) fn choose(
    policy: PriorityPolicy,
    waiting: &mut Waiting,
    pin: Option<&Pin>,
    backlog: Backlog,
    ended: &mut Vec<Request>,
) -> Option<Chosen> {
    let mut stale = Vec::new();
    let mut chosen = None;
    for id in waiting.in_line() {
        let req = waiting.get(id).expect("ids in line are live requests");
        let group = req.group.as_deref();
        let mut takes_pin = false;
        if let PriorityPolicy::PinnedClient { .. } = policy {
            let asked = group.map_or("", |g| g.id.as_str());
            match pin {
                // A body that was not JSON has no group at all: nats-server serves it without
                // pinning anyone.
                None if asked.is_empty() => takes_pin = group.is_some(),
                Some(pin) if *pin.id == *asked => {}
                Some(_) if asked.is_empty() => continue,
                _ => {
                    stale.push(id);
                    continue;
                }
            }
        }
        if policy == PriorityPolicy::Overflow {
            if let Some(g) = group {
                let gated = g.min_pending > 0 || g.min_ack_pending > 0;
                let met = (g.min_pending > 0 && g.min_pending as u64 <= backlog.num_pending)
                    || (g.min_ack_pending > 0
                        && g.min_ack_pending as u64 <= backlog.num_ack_pending);
                if gated && !met {
                    continue;
                }
            }
        }
        chosen = Some(Chosen { id, takes_pin });
        break;
    }
    for id in stale {
        ended.extend(waiting.remove(id));
    }
    chosen
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_ids_look_like_nuids_and_repeat_per_seed() {
        let mut a = PinIds::default();
        a.reseed(7);
        let mut b = a.clone();
        let (x, y) = (a.next(), a.next());
        assert_eq!(x.len(), 22);
        assert!(x.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(x, y);
        assert_eq!((b.next(), b.next()), (x, y));
        let mut c = PinIds::default();
        c.reseed(8);
        assert_ne!(c.next(), a.clone().next());
    }
}
