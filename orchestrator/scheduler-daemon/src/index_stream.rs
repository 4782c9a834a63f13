//! Which stream the scheduler's program index follows.

use mcjs_client::ChainClient;
use mcjs_client::rpc::ProgramIndex;

use crate::shell::DaemonError;

/// The stream the scheduler's program index follows (backfills are always
/// JSON-RPC `getProgramAccounts` at `rpc_url`).
#[derive(Clone, Debug, Default)]
pub enum IndexStream {
    /// `programSubscribe` on the RPC node's websocket.
    #[default]
    Websocket,
    /// A Yellowstone gRPC endpoint (`http://host:10000`; the provider's
    /// token, if any, as `x_token`). Needs the `yellowstone` feature.
    Yellowstone {
        endpoint: String,
        x_token: Option<String>,
    },
}

impl IndexStream {
    pub(crate) fn follow(&self, client: &ChainClient) -> Result<ProgramIndex, DaemonError> {
        match self {
            IndexStream::Websocket => Ok(ProgramIndex::follow(client.clone())),
            #[cfg(feature = "yellowstone")]
            IndexStream::Yellowstone { endpoint, x_token } => Ok(ProgramIndex::follow(
                mcjs_client::rpc::yellowstone::YellowstoneSource::new(
                    endpoint,
                    x_token.clone(),
                    client.clone(),
                ),
            )),
            #[cfg(not(feature = "yellowstone"))]
            IndexStream::Yellowstone { .. } => Err(DaemonError::NoYellowstone),
        }
    }
}
