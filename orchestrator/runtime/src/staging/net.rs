//! What a data transfer may reach: the check for the provider's internal
//! addresses, the resolver that keeps only public ones, and the HTTP client
//! that stages http(s) inputs through it.

use super::StagingPolicy;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Whether `ip` is on the provider's own side: loopback, private,
/// link-local (cloud metadata at 169.254.169.254), CGNAT, unspecified,
/// multicast, reserved, or an IPv6 form of one of those (fd00:ec2::254 is
/// unique-local).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal_v4(v4);
            }
            let seg = v6.segments();
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address.
            if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [a, b] = seg[6].to_be_bytes();
                let [c, d] = seg[7].to_be_bytes();
                return is_internal_v4(Ipv4Addr::new(a, b, c, d));
            }
            if seg[0] == 0x2002 {
                let [a, b] = seg[1].to_be_bytes();
                let [c, d] = seg[2].to_be_bytes();
                return is_internal_v4(Ipv4Addr::new(a, b, c, d));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local
                || (seg[0] & 0xffc0) == 0xfe80 // link-local
                || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (seg[..6] == [0, 0, 0, 0, 0, 0] && v6 != Ipv6Addr::UNSPECIFIED) // IPv4-compatible
        }
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// Resolves names for data transfers, keeping only public addresses: hyper
/// connects to what this returns, so the check holds for the address
/// actually connected to, whatever DNS answers the next time (rebinding).
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                all.into_iter().filter(|a| !is_internal(a.ip())).collect();
            if public.is_empty() {
                return Err(format!(
                    "{host} resolves only to internal addresses (loopback, private, link-local or metadata), which data transfers may not reach"
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The internal address literal in `url`'s host, if any (a literal never
/// goes through the resolver).
pub(super) fn internal_literal(url: &url::Url) -> Option<IpAddr> {
    let ip = match url.host()? {
        url::Host::Ipv4(v4) => IpAddr::V4(v4),
        url::Host::Ipv6(v6) => IpAddr::V6(v6),
        url::Host::Domain(_) => return None,
    };
    is_internal(ip).then_some(ip)
}

pub(super) fn http_client(policy: &StagingPolicy) -> reqwest::Client {
    let allow_private = policy.allow_private;
    let mut builder = reqwest::Client::builder()
        // A proxy would connect for us, past the address check.
        .no_proxy()
        .connect_timeout(policy.connect_timeout)
        .read_timeout(policy.read_timeout)
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else if !allow_private && internal_literal(attempt.url()).is_some() {
                attempt.error("redirected to an internal address")
            } else if !matches!(attempt.url().scheme(), "http" | "https") {
                attempt.error("redirected to another scheme")
            } else {
                attempt.follow()
            }
        }));
    if !allow_private {
        builder = builder.dns_resolver(Arc::new(PublicOnly));
    }
    builder.build().expect("an HTTP client for data staging")
}

/// An error with its causes: reqwest's own message hides why a connection failed.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
