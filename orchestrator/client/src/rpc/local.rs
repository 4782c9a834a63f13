//! The local chain's cheat codes (surfpool's `surfnet_*` methods): only a
//! local chain answers them, and only builds with the `local-chain` feature
//! (the tests' builds) can call them.

use super::*;

impl ChainClient {
    /// Overwrites an account's data through surfpool's `surfnet_setAccount`
    /// cheatcode. Only a local chain answers it.
    pub async fn surfnet_set_account_data(
        &self,
        key: &Pubkey,
        data: &[u8],
    ) -> Result<(), ChainError> {
        self.cheat(
            "surfnet_setAccount",
            json!([key.to_string(), { "data": hex::encode(data) }]),
        )
        .await
    }

    /// Moves a local chain's clock forward through surfpool's
    /// `surfnet_timeTravel` cheatcode.
    pub async fn surfnet_time_travel_to(&self, unix_timestamp_ms: u64) -> Result<(), ChainError> {
        self.cheat(
            "surfnet_timeTravel",
            json!([{ "absoluteTimestamp": unix_timestamp_ms }]),
        )
        .await
    }

    async fn cheat(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<(), ChainError> {
        let _: serde_json::Value = self
            .rpc
            .send(RpcRequest::Custom { method }, params)
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(())
    }
}
