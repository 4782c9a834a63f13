//! The store gateway (`mcjs_protocol::store`): the only holder of the store's
//! credentials signs short-lived URLs for what the chain allows each caller,
//! and performs the few requests that carry no object bytes (listing, the
//! two ends of a multipart upload, publishing a spec).
//!
//! Every request is authenticated (signature, clock) and then authorised
//! op by op ([`crate::store_gate::authorize`]) against the chain: for an
//! owner as read for this request, for a node as read at most two seconds
//! ago ([`crate::node_views`]) or as the index holds it, and read again at
//! once when that refuses (a job or a check given to the node a moment
//! ago: with the index, the node and its job are read by address into it,
//! `refresh_indexed`); one refused op
//! refuses the whole request before anything is signed or performed.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mcjs::state::{Job, VerificationState};
use mcjs_client::rpc::{IndexState, Indexed, JobFilter, ProgramIndex};
use mcjs_client::{ChainClient, Pubkey};
use mcjs_protocol::auth::check_fresh;
use mcjs_protocol::store::{
    Grant, MAX_SPEC_BYTES, ObjectKind, STORE_SIGN_PATH, STORE_SPEC_PATH, SpecStored, SpecUpload,
    StoreInfo, StoreOp, StoreUrl, layout,
};
use mcjs_protocol::{Refusal, SignedRequest};

use crate::metrics::Metrics;
use crate::node_views::{NodeView, NodeViews};
use crate::quota::{Pending, WalletQuota};
use crate::server::{Clock, error};
use crate::standby::StandbyBook;
use crate::store_gate::{Caller, Checking, SpecInput, authorize, granting};

pub use crate::s3::{S3Error, S3Store};

mod sign;
pub use sign::sign;

#[derive(Clone)]
pub struct GatewayState {
    pub url: StoreUrl,
    /// Present for an `s3://` store.
    pub s3: Option<Arc<S3Store>>,
    pub client: ChainClient,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    /// The key that speaks for each node, as the scheduler last read it:
    /// a node request from any other key is refused before the chain is
    /// asked anything.
    pub directory: Arc<std::sync::RwLock<crate::auth::Directory>>,
    pub limits: Arc<GatewayLimits>,
    /// Each node's operator, jobs and checks as last read
    /// ([`crate::node_views`]): a few chain calls per node every two
    /// seconds, not three per request.
    pub views: Arc<NodeViews>,
    /// The program's accounts in memory, shared with the reconcile loop:
    /// while it is live, a node's view and an owner's jobs are read from it
    /// at each request and the chain is not asked.
    pub index: Option<ProgramIndex>,
    /// The warm standbys of the scheduler's last round: what each node may
    /// read as one ([`crate::standby`]).
    pub standbys: Arc<std::sync::RwLock<StandbyBook>>,
}

/// What a stranger can make the gateway do, bounded
/// ([`governor`]'s GCRA limiters: exact, lock-free, O(1) per check).
///
/// - Every signer, after its signature checks: `per_key` (a busy node
///   uploads a checkpoint in many parts; nothing honest needs more).
/// - Owner requests, together: `owner_lookups`, since each costs a chain
///   scan for the owner's jobs and any fresh wallet can sign one. Node
///   requests do not draw on it: a node must be in the directory, and the
///   directory costs nothing to read.
///
/// A refused request costs a signature check and no chain call.
///
/// Owner lookups are also held per peer address (`owner_per_peer`, an IPv6
/// peer by its /64: [`mcjs_protocol::peer::peer_key`]), below the shared
/// budget, so that one address signing with fresh wallets cannot spend the
/// whole of it and lock honest owners out.
///
/// What a wallet keeps, in total: [`WalletQuota`] (bytes and objects in its
/// own space, open uploads, published specs), with the transfers granted and
/// not yet listed in `pending` ([`crate::quota`]).
pub struct GatewayLimits {
    per_key: governor::DefaultKeyedRateLimiter<Pubkey>,
    owner_lookups: governor::DefaultDirectRateLimiter,
    owner_per_peer: governor::DefaultKeyedRateLimiter<IpAddr>,
    checked: std::sync::atomic::AtomicU64,
    pub quota: WalletQuota,
    pending: std::sync::Mutex<Pending>,
}

impl GatewayLimits {
    pub fn new(
        per_key: governor::Quota,
        owner_lookups: governor::Quota,
        owner_per_peer: governor::Quota,
    ) -> Self {
        Self {
            per_key: governor::RateLimiter::keyed(per_key),
            owner_lookups: governor::RateLimiter::direct(owner_lookups),
            owner_per_peer: governor::RateLimiter::keyed(owner_per_peer),
            checked: std::sync::atomic::AtomicU64::new(0),
            quota: WalletQuota::STANDARD,
            pending: std::sync::Mutex::default(),
        }
    }

    /// The same limits with another quota per wallet.
    pub fn with_quota(mut self, quota: WalletQuota) -> Self {
        self.quota = quota;
        self
    }

    /// 100 requests a second per signer (bursts of 200); 20 owner lookups a
    /// second for everyone together (bursts of 50), of which one address
    /// may take 10 a second (bursts of 25).
    pub fn standard() -> Self {
        use std::num::NonZeroU32;
        let n = |v| NonZeroU32::new(v).expect("non-zero");
        Self::new(
            governor::Quota::per_second(n(100)).allow_burst(n(200)),
            governor::Quota::per_second(n(20)).allow_burst(n(50)),
            governor::Quota::per_second(n(10)).allow_burst(n(25)),
        )
    }

    fn admit_signer(&self, signer: &Pubkey) -> bool {
        // Fresh keys each leave an entry: forget the idle ones now and then.
        if self
            .checked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .is_multiple_of(4_096)
        {
            self.per_key.retain_recent();
            self.owner_per_peer.retain_recent();
        }
        self.per_key.check_key(signer).is_ok()
    }

    /// The peer's share first, so a peer over it spends nothing of the
    /// shared budget.
    /// An upload was completed (its object is listed now) or aborted.
    fn upload_closed(&self, upload_id: &str) -> Grant {
        self.pending
            .lock()
            .expect("pending transfers")
            .closed(upload_id);
        Grant::Done
    }

    fn admit_owner_lookup(&self, peer: IpAddr) -> bool {
        self.owner_per_peer.check_key(&peer).is_ok() && self.owner_lookups.check().is_ok()
    }
}

impl GatewayState {
    /// The jobs `node` stands by for, as the last round named them.
    fn standby_of(&self, node: &Pubkey) -> Vec<(Pubkey, Job)> {
        self.standbys
            .read()
            .map(|book| book.jobs_of(node))
            .unwrap_or_default()
    }

    fn refuse(&self, reason: &'static str, status: StatusCode, message: String) -> Response {
        self.metrics
            .store_refused
            .with_label_values(&[reason])
            .inc();
        tracing::debug!(reason, %message, "store request refused");
        error(status, message)
    }

    fn refusal(&self, refusal: Refusal) -> Response {
        let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
        self.refuse(
            refusal.label(),
            status,
            format!("store request refused: {refusal}"),
        )
    }

    fn s3(&self) -> Result<&Arc<S3Store>, Response> {
        self.s3.as_ref().ok_or_else(|| {
            error(
                StatusCode::CONFLICT,
                format!(
                    "this deployment's store is {}: every process opens it directly, nothing is signed",
                    self.url
                ),
            )
        })
    }
}

/// The gateway's routes ([`mcjs_protocol::store`]).
pub fn routes(state: GatewayState) -> axum::Router {
    use axum::routing::{get, post};
    axum::Router::new()
        .route(mcjs_protocol::store::STORE_INFO_PATH, get(info))
        .route(STORE_SIGN_PATH, post(sign))
        .route(STORE_SPEC_PATH, post(publish_spec))
        .with_state(state)
}

pub async fn info(State(state): State<GatewayState>) -> Response {
    Json(StoreInfo {
        url: state.url.to_string(),
    })
    .into_response()
}

/// Opens a signed request for `path`: the signature, then the clock.
fn open<T: serde::de::DeserializeOwned>(
    state: &GatewayState,
    body: &[u8],
    path: &str,
    sent_at: impl Fn(&T) -> i64,
) -> Result<(Pubkey, T), Refusal> {
    let request = SignedRequest::parse(body)?;
    let message: T = request.message()?;
    let signer = Pubkey::new_from_array(request.signer_key()?);
    request.verify(path)?;
    check_fresh(sent_at(&message), (state.clock)())?;
    Ok((signer, message))
}

/// What the chain says of `node` (its operator, its jobs, the checks it
/// owes): a view read within `fresh_for` ([`VIEW_FRESH`](crate::node_views::VIEW_FRESH), or
/// [`VIEW_RECHECK`](crate::node_views::VIEW_RECHECK) after a refusal), else read now; when the chain cannot
/// be read, a view up to 30 s old, else 502.
async fn node_view(
    state: &GatewayState,
    node: Pubkey,
    fresh_for: Duration,
) -> Result<Arc<NodeView>, Response> {
    let now = std::time::Instant::now();
    let standby = state.standby_of(&node);
    if let Some(indexed) = state
        .index
        .as_ref()
        .and_then(|i| i.live(|s| indexed_view(s, &node, standby.clone())))
    {
        return match indexed {
            Some(view) => Ok(state.views.put(node, view, now)),
            None => Err(state.refusal(Refusal::UnknownNode(node.to_string()))),
        };
    }
    if let Some(view) = state.views.read_within(&node, now, fresh_for) {
        return Ok(view);
    }
    let unreadable = |e: String| match state.views.stale(&node, now) {
        Some(view) => {
            tracing::debug!(%node, error = %e, "chain unreadable: the node's last view serves");
            Ok(view)
        }
        None => Err(error(StatusCode::BAD_GATEWAY, format!("chain: {e}"))),
    };
    let account = match state.client.node(&node).await {
        Ok(Some(n)) => n,
        Ok(None) => return Err(state.refusal(Refusal::UnknownNode(node.to_string()))),
        Err(e) => return unreadable(e.to_string()),
    };
    let jobs = match state.client.jobs(JobFilter::Node(node)).await {
        Ok(jobs) => jobs,
        Err(e) => return unreadable(e.to_string()),
    };
    let checking = match state.client.due_checks(&node).await {
        // Only checks still to be answered give store access.
        Ok(due) => due
            .into_iter()
            .filter(|c| c.verification.state == VerificationState::Open)
            .map(|c| Checking {
                job: c.verification.job,
                interval: c.verification.interval,
                start_step: c.verification.from.map(|f| f.step),
                account: c.job,
            })
            .collect(),
        Err(e) => return unreadable(e.to_string()),
    };
    let view = NodeView {
        operator: account.operator,
        jobs,
        checking,
        standby,
    };
    Ok(state.views.put(node, view, now))
}

/// The index may lag the chain by a moment: the agent of a node given a
/// job just now hears of it over its own subscription, possibly before the
/// index's stream, and asks for the job's checkpoint at once. After a
/// refusal, reads the node and then the job it names by address into the
/// index (at most once per [`VIEW_RECHECK`](crate::node_views::VIEW_RECHECK) per node); returns whether it
/// read.
async fn refresh_indexed(state: &GatewayState, node: Pubkey) -> bool {
    let Some(index) = &state.index else {
        return false;
    };
    if !state.views.may_refresh(&node, std::time::Instant::now()) {
        return false;
    }
    if let Err(error) = index.refresh(&state.client, &[node]).await {
        tracing::debug!(%node, %error, "cannot read a refused node's account");
        return false;
    }
    let job = index
        .live(|s| match s.get(&node) {
            Some(Indexed::Node(account)) => account.current_job,
            _ => None,
        })
        .flatten();
    if let Some(job) = job
        && let Err(error) = index.refresh(&state.client, &[job]).await
    {
        tracing::debug!(%node, %job, %error, "cannot read a refused node's job");
    }
    true
}

/// `node`'s view from the index: what [`node_view`] reads of the chain
/// otherwise (`None`: no such node).
fn indexed_view(
    index: &IndexState,
    node: &Pubkey,
    standby: Vec<(Pubkey, Job)>,
) -> Option<NodeView> {
    let Some(Indexed::Node(account)) = index.get(node) else {
        return None;
    };
    // A node is granted only what its assigned or running jobs allow
    // (`store_gate::active_on`): never a settled job's, so those are not
    // even looked at.
    let jobs = index.unsettled_jobs_where(|job| job.node == Some(*node));
    let checking = index
        .verifications_where(|v| {
            v.state == VerificationState::Open && !mcjs_client::rpc::due_roles(v, node).is_empty()
        })
        .into_iter()
        .filter_map(|(_, v)| match index.get(&v.job) {
            Some(Indexed::Job(job)) => Some(Checking {
                job: v.job,
                interval: v.interval,
                start_step: v.from.map(|f| f.step),
                account: job.clone(),
            }),
            _ => None,
        })
        .collect();
    Some(NodeView {
        operator: account.operator,
        jobs,
        checking,
        standby,
    })
}

/// What `view` lets its node do: the `users/` objects its jobs' specs name
/// (read only when the request touches `users/`; specs are cached by hash),
/// or why one of `ops` is refused.
async fn node_grants(
    s3: &S3Store,
    node: &Pubkey,
    view: &NodeView,
    ops: &[StoreOp],
) -> Result<Result<Vec<SpecInput>, String>, Response> {
    let mut inputs = Vec::new();
    let wants_user_data = ops
        .iter()
        .any(|op| matches!(ObjectKind::classify(op.path()), ObjectKind::UserData { .. }));
    if wants_user_data {
        let hashes: std::collections::BTreeSet<[u8; 32]> =
            granting(node, &view.jobs, &view.checking)
                .map(|j| j.spec_hash)
                .collect();
        for hash in hashes {
            match s3.inputs_of(hash).await {
                Ok(named) => inputs.extend(named.iter().cloned()),
                Err(e) => return Err(error(StatusCode::BAD_GATEWAY, e.to_string())),
            }
        }
    }
    let caller = Caller::Node {
        node: *node,
        jobs: &view.jobs,
        checking: &view.checking,
        standby: &view.standby,
        inputs: &inputs,
    };
    for op in ops {
        if let Err(why) = authorize(op, &caller) {
            return Ok(Err(why));
        }
    }
    Ok(Ok(inputs))
}

/// Publishes a spec: any signed wallet may, since the scheduler writes only
/// a valid spec and only under its own hash.
pub async fn publish_spec(
    State(state): State<GatewayState>,
    extensions: axum::http::Extensions,
    body: Bytes,
) -> Response {
    let peer = mcjs_protocol::peer::peer_of(&extensions);
    let s3 = match state.s3() {
        Ok(s3) => Arc::clone(s3),
        Err(r) => return r,
    };
    if body.len() > MAX_SPEC_BYTES * 2 {
        return state.refusal(Refusal::Malformed(format!(
            "a spec upload is at most {MAX_SPEC_BYTES} bytes"
        )));
    }
    let (signer, upload) =
        match open::<SpecUpload>(&state, &body, STORE_SPEC_PATH, |m| m.sent_at_unix_ms) {
            Ok(opened) => opened,
            Err(r) => return state.refusal(r),
        };
    // Any wallet may publish: each signer, and all of them together, are
    // held to the owners' budget (a publish costs two store requests).
    if !state.limits.admit_signer(&signer) || !state.limits.admit_owner_lookup(peer) {
        return state.refuse(
            "rate_limited",
            StatusCode::TOO_MANY_REQUESTS,
            "spec refused: too many specs are being published; try again in a second".into(),
        );
    }
    if upload.spec.len() > MAX_SPEC_BYTES {
        return state.refusal(Refusal::Malformed(format!(
            "a spec is at most {MAX_SPEC_BYTES} bytes"
        )));
    }
    let spec = match mcjs_spec::JobSpec::from_json(&upload.spec) {
        Ok(spec) => spec,
        Err(e) => {
            return state.refuse(
                "invalid_spec",
                StatusCode::BAD_REQUEST,
                format!("not a valid job spec: {e}"),
            );
        }
    };
    let canonical = mcjs_spec::canonical_json(&spec);
    let path = layout::spec(&mcjs_spec::spec_hash(&spec));
    let existed = match s3.exists(&path).await {
        Ok(e) => e,
        Err(e) => return error(StatusCode::BAD_GATEWAY, e.to_string()),
    };
    if !existed {
        // A marker per spec a wallet published (a prefix nobody but the
        // scheduler reads or writes) counts them.
        let published = layout::published(&signer.to_string());
        let specs = state.limits.quota.specs;
        match s3.usage(&published, specs).await {
            Ok(stored) if stored.usage.objects >= specs => {
                return state.refuse(
                    "quota",
                    StatusCode::FORBIDDEN,
                    format!(
                        "spec refused: wallet {signer} has published {} specs, the most one wallet may",
                        stored.usage.objects
                    ),
                );
            }
            Ok(_) => {}
            Err(e) => return error(StatusCode::BAD_GATEWAY, e.to_string()),
        }
        let hash = path.trim_start_matches("specs/").trim_end_matches(".json");
        if let Err(e) = s3.put(&format!("{published}/{hash}"), Vec::new()).await {
            return error(StatusCode::BAD_GATEWAY, e.to_string());
        }
        if let Err(e) = s3.put(&path, canonical.into_bytes()).await {
            return error(StatusCode::BAD_GATEWAY, e.to_string());
        }
    }
    Json(SpecStored { path, existed }).into_response()
}
