//! `sign`, the gateway's answer to a store request, as the steps it is:
//! open the request, identify the caller, authorise every op, admit an
//! owner's writes to its quota, presign. Each step has its own error, and
//! each error its one response (status, label, message).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mcjs::state::Job;
use mcjs_client::Pubkey;
use mcjs_client::rpc::JobFilter;
use mcjs_protocol::Refusal;
use mcjs_protocol::store::{
    GRANT_TTL_SECS, Grant, MAX_OPS, ObjectKind, Role, STORE_SIGN_PATH, StoreOp, StoreRequest,
    StoreResponse, layout,
};

use super::{GatewayState, S3Store, node_grants, node_view, open, refresh_indexed};
use crate::node_views::{VIEW_FRESH, VIEW_RECHECK};
use crate::server::error;
use crate::store_gate::{Caller, Checking, SpecInput, authorize};

/// Signs what a store request asks, op by op, or refuses the whole of it:
/// the request opened, its caller identified, every op authorised, an
/// owner's writes admitted to its quota, then each op presigned (or
/// performed).
pub async fn sign(
    State(state): State<GatewayState>,
    extensions: axum::http::Extensions,
    body: Bytes,
) -> Response {
    signed(&state, &extensions, &body)
        .await
        .unwrap_or_else(|refused| refused)
}

/// [`sign`]'s steps, in order; the first refusal is the response.
async fn signed(
    state: &GatewayState,
    extensions: &axum::http::Extensions,
    body: &[u8],
) -> Result<Response, Response> {
    let peer = mcjs_protocol::peer::peer_of(extensions);
    let Opened {
        s3,
        signer,
        request,
    } = open_request(state, body).map_err(|e| e.response(state))?;
    let identified = identify(state, peer, &s3, signer, &request)
        .await
        .map_err(|e| e.response(state))?;
    let caller = identified.caller(signer);
    authorize_ops(&caller, &request.ops).map_err(|e| e.response(state))?;
    admit(state, &s3, signer, &caller, &request.ops)
        .await
        .map_err(|e| e.response(state))?;
    let owner = matches!(caller, Caller::Owner { .. }).then_some(signer);
    let grants = presign(state, &s3, owner, &request.ops)
        .await
        .map_err(|e| e.response())?;
    state.metrics.store_grants.inc_by(grants.len() as u64);
    Ok(Json(StoreResponse { grants }).into_response())
}

/// A store request opened: signed, fresh, of 1 to [`MAX_OPS`] ops, within
/// its signer's rate.
struct Opened {
    s3: Arc<S3Store>,
    signer: Pubkey,
    request: StoreRequest,
}

/// Why a store request is not opened.
enum OpenError {
    /// The store is no `s3://` store: nothing is signed.
    NoGateway(Box<Response>),
    Refused(Refusal),
    RateLimited(Pubkey),
}

impl OpenError {
    fn response(self, state: &GatewayState) -> Response {
        match self {
            OpenError::NoGateway(response) => *response,
            OpenError::Refused(refusal) => state.refusal(refusal),
            OpenError::RateLimited(signer) => state.refuse(
                "rate_limited",
                StatusCode::TOO_MANY_REQUESTS,
                format!("store request refused: {signer} sends too many requests; slow down"),
            ),
        }
    }
}

/// Opens a store request: the gateway's store, the signature and the clock,
/// the number of ops, the signer's rate.
fn open_request(state: &GatewayState, body: &[u8]) -> Result<Opened, OpenError> {
    let s3 = Arc::clone(state.s3().map_err(|r| OpenError::NoGateway(Box::new(r)))?);
    let (signer, request) =
        open::<StoreRequest>(state, body, STORE_SIGN_PATH, |m| m.sent_at_unix_ms)
            .map_err(OpenError::Refused)?;
    if request.ops.is_empty() || request.ops.len() > MAX_OPS {
        return Err(OpenError::Refused(Refusal::Malformed(format!(
            "a request carries 1 to {MAX_OPS} operations"
        ))));
    }
    if !state.limits.admit_signer(&signer) {
        return Err(OpenError::RateLimited(signer));
    }
    Ok(Opened {
        s3,
        signer,
        request,
    })
}

/// The caller as the chain says it is now: for a node, its jobs, the jobs it
/// checks, those it stands by for and the inputs their specs name; for an
/// owner, its jobs.
struct Identified {
    node: Option<Pubkey>,
    jobs: Vec<(Pubkey, Job)>,
    checking: Vec<Checking>,
    standby: Vec<(Pubkey, Job)>,
    inputs: Vec<SpecInput>,
}

impl Identified {
    fn owner(jobs: Vec<(Pubkey, Job)>) -> Self {
        Self {
            node: None,
            jobs,
            checking: Vec::new(),
            standby: Vec::new(),
            inputs: Vec::new(),
        }
    }

    fn caller(&self, signer: Pubkey) -> Caller<'_> {
        match self.node {
            Some(node) => Caller::Node {
                node,
                jobs: &self.jobs,
                checking: &self.checking,
                standby: &self.standby,
                inputs: &self.inputs,
            },
            None => Caller::Owner {
                owner: signer,
                jobs: &self.jobs,
            },
        }
    }
}

/// Why the caller is not identified, or a node is refused what it asks.
enum CallerError {
    Refused(Refusal),
    /// What a node's view refuses it.
    Denied(String),
    /// The owners' lookup budget is spent.
    Busy,
    /// The owner's jobs cannot be read.
    Chain(String),
    /// The node's view cannot be read, or its specs' inputs.
    Unread(Response),
}

impl CallerError {
    fn response(self, state: &GatewayState) -> Response {
        match self {
            CallerError::Refused(refusal) => state.refusal(refusal),
            CallerError::Denied(why) => AuthorizeError(why).response(state),
            CallerError::Busy => state.refuse(
                "busy",
                StatusCode::TOO_MANY_REQUESTS,
                "store request refused: the gateway is answering as many owners as it can; try again in a second".into(),
            ),
            CallerError::Chain(e) => error(StatusCode::BAD_GATEWAY, format!("chain: {e}")),
            CallerError::Unread(response) => response,
        }
    }
}

/// Who signed `request`, as the chain says now. An owner touching only its
/// own space is known without a chain read (nothing on chain decides it, so
/// nothing of the owners' lookup budget is spent: an upload of many parts
/// costs the chain nothing); any other owner is read within that budget.
async fn identify(
    state: &GatewayState,
    peer: IpAddr,
    s3: &S3Store,
    signer: Pubkey,
    request: &StoreRequest,
) -> Result<Identified, CallerError> {
    match &request.role {
        Role::Node { node } => identify_node(state, s3, signer, node, &request.ops).await,
        Role::Owner
            if request.ops.iter().all(|op| {
                matches!(ObjectKind::classify(op.path()), ObjectKind::UserData { owner } if owner == signer.to_string())
            }) =>
        {
            Ok(Identified::owner(Vec::new()))
        }
        Role::Owner if !state.limits.admit_owner_lookup(peer) => Err(CallerError::Busy),
        Role::Owner => match state
            .index
            .as_ref()
            .and_then(|i| i.live(|s| s.jobs_where(|job| job.owner == signer)))
        {
            Some(jobs) => Ok(Identified::owner(jobs)),
            None => match state.client.jobs(JobFilter::Owner(signer)).await {
                Ok(jobs) => Ok(Identified::owner(jobs)),
                Err(e) => Err(CallerError::Chain(e.to_string())),
            },
        },
    }
}

/// A node's request: from the key the directory names for it, and allowed
/// by its view. A view up to two seconds old (or the index's); when it
/// refuses, one read now (unless the view is already that fresh, or the
/// index read the node's accounts a moment ago): the chain may have given
/// the node a job or a check a moment ago.
async fn identify_node(
    state: &GatewayState,
    s3: &S3Store,
    signer: Pubkey,
    node: &str,
    ops: &[StoreOp],
) -> Result<Identified, CallerError> {
    let foreign = || {
        CallerError::Refused(Refusal::Foreign {
            node: node.to_string(),
            signer: signer.to_string(),
        })
    };
    let Ok(node_key) = node.parse::<Pubkey>() else {
        return Err(CallerError::Refused(Refusal::Malformed(
            "`node` is not a base58 key".into(),
        )));
    };
    let known = state
        .directory
        .read()
        .ok()
        .and_then(|d| d.authorised(&node_key));
    match known {
        None => return Err(CallerError::Refused(Refusal::UnknownNode(node.to_string()))),
        Some(key) if key != signer => return Err(foreign()),
        Some(_) => {}
    }
    let mut view = node_view(state, node_key, VIEW_FRESH)
        .await
        .map_err(CallerError::Unread)?;
    let mut granted = node_grants(s3, &node_key, &view, ops).await;
    let stale = || {
        let now = std::time::Instant::now();
        state
            .views
            .read_within(&node_key, now, VIEW_RECHECK)
            .is_none()
    };
    let refused = matches!(granted, Ok(Err(_)));
    let indexed = state
        .index
        .as_ref()
        .is_some_and(|i| i.live(|_| ()).is_some());
    let recheck = refused
        && match indexed {
            true => refresh_indexed(state, node_key).await,
            false => stale(),
        };
    if recheck {
        view = node_view(state, node_key, Duration::ZERO)
            .await
            .map_err(CallerError::Unread)?;
        granted = node_grants(s3, &node_key, &view, ops).await;
    }
    if view.operator != signer {
        return Err(foreign());
    }
    let inputs = granted
        .map_err(CallerError::Unread)?
        .map_err(CallerError::Denied)?;
    Ok(Identified {
        node: Some(node_key),
        jobs: view.jobs.clone(),
        checking: view.checking.clone(),
        standby: view.standby.clone(),
        inputs,
    })
}

/// Why an op is refused to its caller.
struct AuthorizeError(String);

impl AuthorizeError {
    fn response(self, state: &GatewayState) -> Response {
        state.refuse(
            "denied",
            StatusCode::FORBIDDEN,
            format!("store request refused: {}", self.0),
        )
    }
}

/// Every op allowed to `caller` ([`authorize`]); one refused refuses all.
fn authorize_ops(caller: &Caller<'_>, ops: &[StoreOp]) -> Result<(), AuthorizeError> {
    ops.iter()
        .try_for_each(|op| authorize(op, caller).map_err(AuthorizeError))
}

/// Why an owner's writes are not admitted.
enum AdmitError {
    /// The store does not say what the wallet keeps.
    Store(String),
    Quota(String),
}

impl AdmitError {
    fn response(self, state: &GatewayState) -> Response {
        match self {
            AdmitError::Store(e) => error(StatusCode::BAD_GATEWAY, e),
            AdmitError::Quota(why) => state.refuse(
                "quota",
                StatusCode::FORBIDDEN,
                format!("store request refused: {why}"),
            ),
        }
    }
}

/// An owner's writes into its own space: within its quota, counting what it
/// stores now (listed) and what it was granted and has not sent yet; held
/// as pending until listed or expired. A node writes nothing there.
async fn admit(
    state: &GatewayState,
    s3: &S3Store,
    signer: Pubkey,
    caller: &Caller<'_>,
    ops: &[StoreOp],
) -> Result<(), AdmitError> {
    let own_writes: Vec<&StoreOp> = match caller {
        Caller::Owner { .. } => ops
            .iter()
            .filter(|op| {
                op.writes()
                    && matches!(ObjectKind::classify(op.path()), ObjectKind::UserData { .. })
            })
            .collect(),
        Caller::Node { .. } => Vec::new(),
    };
    if own_writes.is_empty() {
        return Ok(());
    }
    let quota = state.limits.quota;
    let stored = s3
        .usage(&layout::user_space(&signer.to_string()), quota.objects)
        .await
        .map_err(|e| AdmitError::Store(e.to_string()))?;
    let now = (state.clock)();
    let expires = now.saturating_add(GRANT_TTL_SECS as i64 * 1000);
    state
        .limits
        .pending
        .lock()
        .expect("pending transfers")
        .admit(&signer, &stored, &own_writes, &quota, now, expires)
        .map_err(|why| AdmitError::Quota(why.to_string()))
}

/// The store failed an op the gateway performs.
struct PresignError(String);

impl PresignError {
    fn response(self) -> Response {
        error(StatusCode::BAD_GATEWAY, self.0)
    }
}

/// A grant per op, in order: a presigned URL, or for the ops that carry no
/// object bytes (listing, the two ends of a multipart upload) the store's
/// answer. An upload an `owner` opens is pending against its quota until
/// closed.
async fn presign(
    state: &GatewayState,
    s3: &S3Store,
    owner: Option<Pubkey>,
    ops: &[StoreOp],
) -> Result<Vec<Grant>, PresignError> {
    let mut grants = Vec::with_capacity(ops.len());
    for op in ops {
        // A job's output is written once: no grant can replace what its
        // node stored (after it is paid, above all), and none deletes it.
        let create_only = matches!(ObjectKind::classify(op.path()), ObjectKind::Output { .. });
        if let Some((method, url, headers)) = s3.presign(op, create_only) {
            grants.push(Grant::Url {
                method: method.to_string(),
                url: url.to_string(),
                headers,
            });
            continue;
        }
        let done = match op {
            StoreOp::List {
                prefix,
                delimiter,
                continuation,
            } => s3
                .list(prefix, *delimiter, continuation.as_deref())
                .await
                .map(Grant::Listing),
            StoreOp::CreateMultipart { path } => s3.create_multipart(path).await.map(|upload_id| {
                if let Some(owner) = owner {
                    state
                        .limits
                        .pending
                        .lock()
                        .expect("pending transfers")
                        .opened(owner, path.clone(), upload_id.clone(), (state.clock)());
                }
                Grant::Upload { upload_id }
            }),
            StoreOp::CompleteMultipart {
                path,
                upload_id,
                etags,
            } => s3
                .complete_multipart(path, upload_id, etags)
                .await
                .map(|()| state.limits.upload_closed(upload_id)),
            StoreOp::AbortMultipart { path, upload_id } => s3
                .abort_multipart(path, upload_id)
                .await
                .map(|()| state.limits.upload_closed(upload_id)),
            _ => unreachable!("every other op is presigned"),
        };
        grants.push(done.map_err(|e| PresignError(e.to_string()))?);
    }
    Ok(grants)
}
