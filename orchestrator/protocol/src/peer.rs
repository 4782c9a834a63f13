//! Per-address limits for MCJS's public HTTP endpoints (the scheduler's
//! heartbeats and store gateway, the dashboard), on `tower_governor`
//! (GCRA from `governor`: exact, O(1) per request, keyed by address).
//!
//! Per-key limits bound what one signer can make a server do; they cannot
//! bound a stranger who signs each request with a fresh key, nor requests
//! that fail before a signature is read. A limit per peer address does: the
//! request is refused (429) before its body is read, at the cost of one map
//! lookup. An IPv6 peer is keyed by its /64, since one host is commonly given
//! a whole /64 and could otherwise be 2^64 peers; an IPv4-mapped IPv6
//! address is its IPv4 address.
//!
//! The servers must be served with
//! `into_make_service_with_connect_info::<SocketAddr>()`; a request without
//! its peer address is refused (500), never let through unlimited.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use tower_governor::GovernorError;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::KeyExtractor;

/// The key a peer is limited by: its IPv4 address, or its IPv6 /64.
pub fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The peer a request came from, by [`peer_key`], for a handler's own
/// per-address bounds. A server run without peer addresses (an embedded test
/// server) puts every request under one unspecified address: stricter,
/// never unlimited.
pub fn peer_of(extensions: &axum::http::Extensions) -> IpAddr {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| peer_key(addr.ip()))
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
}

/// `tower_governor`'s key: the connection's peer, by [`peer_key`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerAddress;

impl KeyExtractor for PeerAddress {
    type Key = IpAddr;

    fn extract<T>(&self, req: &axum::http::Request<T>) -> Result<IpAddr, GovernorError> {
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| peer_key(addr.ip()))
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

/// How many requests one address may make: one every `period`, in bursts of
/// `burst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerLimit {
    pub period: Duration,
    pub burst: u32,
}

/// The limiter of one server, shared by its routes. Idle addresses are
/// forgotten by [`PerPeer::forget_idle`], which the server calls now and
/// then, so fresh addresses cannot grow it without bound.
#[derive(Clone)]
pub struct PerPeer {
    config: Arc<GovernorConfig<PeerAddress, governor::middleware::NoOpMiddleware>>,
}

impl PerPeer {
    pub fn new(limit: PeerLimit) -> Self {
        let config = GovernorConfigBuilder::default()
            .key_extractor(PeerAddress)
            .period(limit.period.max(Duration::from_nanos(1)))
            .burst_size(limit.burst.max(1))
            .finish()
            .expect("a non-zero period and burst");
        Self {
            config: Arc::new(config),
        }
    }

    /// The layer to put on a router.
    pub fn layer(
        &self,
    ) -> tower_governor::GovernorLayer<
        PeerAddress,
        governor::middleware::NoOpMiddleware,
        axum::body::Body,
    > {
        tower_governor::GovernorLayer::new(Arc::clone(&self.config))
    }

    /// Forgets addresses whose budget is full again (nothing to remember).
    pub fn forget_idle(&self) {
        self.config.limiter().retain_recent();
    }

    /// Addresses remembered now.
    pub fn remembered(&self) -> usize {
        self.config.limiter().len()
    }

    /// Forgets idle addresses every `every` until `cancel` resolves.
    pub async fn forget_idle_every(
        self,
        every: Duration,
        cancel: impl std::future::Future<Output = ()>,
    ) {
        let mut tick = tokio::time::interval(every);
        tokio::pin!(cancel);
        loop {
            tokio::select! {
                _ = &mut cancel => return,
                _ = tick.tick() => self.forget_idle(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn an_ipv6_host_is_one_peer_per_64_and_a_mapped_ipv4_is_its_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(peer_key(a), peer_key(b));
        assert_ne!(peer_key(a), peer_key(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(peer_key(mapped), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)));
        let v4: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(peer_key(v4), v4);
    }

    #[test]
    fn a_request_without_its_peer_is_refused_not_let_through() {
        let req = axum::http::Request::new(());
        assert!(matches!(
            PeerAddress.extract(&req),
            Err(GovernorError::UnableToExtractKey)
        ));
        let mut req = axum::http::Request::new(());
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 9], 4000))));
        assert_eq!(
            PeerAddress.extract(&req).unwrap(),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9))
        );
    }
}
