//! Who may speak for a node: the key the chain authorises for it, and only
//! in fresh, new, correctly signed requests (`mcjs_protocol::auth`).
//!
//! A heartbeat can get a provider slashed and move its job, so the daemon
//! believes nothing it cannot attribute to the node's own key. Refused
//! requests change nothing: [`authenticate`] is pure, and the server records
//! only what it returns, through [`record_new`].

use std::collections::HashMap;

use mcjs::state::Node;
use mcjs_client::Pubkey;
use mcjs_protocol::auth::{check_fresh, check_sequence};
use mcjs_protocol::{HEARTBEAT_PATH, Heartbeat, Refusal, SignedRequest};

use crate::liveness::Liveness;

/// The key an agent must sign with to speak for `node`: the node's operator
/// key, which runs its jobs on chain but cannot move the provider's money.
pub fn authorised_signer(node: &Node) -> Pubkey {
    node.operator
}

/// Every registered node and the key that speaks for it, as last read from
/// the chain. A node registered since is refused until the next read (one
/// reconcile tick); its agent simply heartbeats again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Directory {
    keys: HashMap<Pubkey, Pubkey>,
}

impl Directory {
    pub fn from_chain(nodes: &[(Pubkey, Node)]) -> Self {
        let keys = nodes
            .iter()
            .map(|(key, node)| (*key, authorised_signer(node)))
            .collect();
        Self { keys }
    }

    pub fn insert(&mut self, node: Pubkey, key: Pubkey) {
        self.keys.insert(node, key);
    }

    pub fn authorised(&self, node: &Pubkey) -> Option<Pubkey> {
        self.keys.get(node).copied()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Opens a heartbeat request received at `now_ms` (the daemon's clock):
/// signed by the key authorised for the node it names, and fresh. Cheap
/// checks on the claimed identity come before the signature, so a stranger
/// naming a node it does not hold the key of costs one map lookup. Needs no
/// lock on the liveness table: the signature (~0.1 ms) is checked while
/// other nodes' heartbeats are recorded.
/// The heartbeat must be for this scheduler's `session`: one sealed for
/// an earlier process of the scheduler is refused, so a line captured before
/// a restart is worthless after it.
pub fn authenticate(
    raw: &[u8],
    now_ms: i64,
    directory: &Directory,
    session: &str,
) -> Result<(Pubkey, Heartbeat), Refusal> {
    let request = SignedRequest::parse(raw)?;
    let heartbeat: Heartbeat = request.message()?;
    let node: Pubkey = heartbeat
        .node
        .parse()
        .map_err(|_| Refusal::Malformed("`node` is not a base58 public key".into()))?;
    let authorised = directory
        .authorised(&node)
        .ok_or_else(|| Refusal::UnknownNode(heartbeat.node.clone()))?;
    let signer = Pubkey::new_from_array(request.signer_key()?);
    if signer != authorised {
        return Err(Refusal::Foreign {
            node: heartbeat.node.clone(),
            signer: signer.to_string(),
        });
    }
    request.verify(HEARTBEAT_PATH)?;
    check_fresh(heartbeat.sent_at_unix_ms, now_ms)?;
    if heartbeat.session != session {
        return Err(Refusal::OtherSession {
            got: heartbeat.session.chars().take(64).collect(),
        });
    }
    Ok((node, heartbeat))
}

/// Records an authenticated heartbeat unless its sequence number is not
/// above the last one recorded for its node (a replay). Check and record
/// happen under the caller's one lock, so two copies cannot both pass.
pub fn record_new(
    liveness: &mut Liveness,
    node: &Pubkey,
    heartbeat: Heartbeat,
    now_ms: i64,
) -> Result<(), Refusal> {
    check_sequence(heartbeat.seq, liveness.last_seq(node))?;
    liveness
        .record(heartbeat, now_ms)
        .map_err(|e| Refusal::Malformed(e.to_string()))
}
