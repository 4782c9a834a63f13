//! Deploying the program's SBF ELF by the upgradeable loader's own
//! transactions, as a cluster deployment does: create a buffer, write the
//! ELF into it a packet at a time, deploy it (or upgrade the program from
//! it), hand the upgrade authority on. The local chain deploys this way
//! too, so that what it runs is what a cluster runs.
//!
//! Writes go out many at a time without preflight and are not trusted to
//! land: after each round the buffer is read back and every chunk whose
//! bytes differ is written again. Each batch of writes is signed with a
//! fresh blockhash, so that a slow cluster (or a fast local one whose
//! blockhashes last a few seconds) does not expire the later ones; the
//! deployment gives up only after [`WRITE_ROUNDS`] rounds in a row that land
//! nothing. The deployed program's bytes are read back and compared with the
//! ELF at the end.

use futures_util::stream::{self, StreamExt as _};
use solana_loader_v3_interface::{
    get_program_data_address, instruction as loader, state::UpgradeableLoaderState,
};
use solana_rpc_client_api::config::RpcSendTransactionConfig;

use super::*;

/// Rounds of writes in a row that may land nothing before the deployment
/// gives up.
pub const WRITE_ROUNDS: usize = 5;
/// Write transactions in flight at once.
const WRITES_IN_FLIGHT: usize = 32;
/// Write transactions signed with one blockhash.
const WRITES_PER_BLOCKHASH: usize = 128;
/// A transaction's size limit on the wire (`PACKET_DATA_SIZE`).
pub(super) const PACKET_BYTES: usize = 1232;
/// How long a deployment waits for the chain to pass its slot.
const INVOCABLE_WITHIN: Duration = Duration::from_secs(30);

/// What a deployment did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Deployed {
    pub program: String,
    pub programdata: String,
    pub upgrade_authority: String,
    pub elf_bytes: usize,
    /// Write transactions sent, rewrites included.
    pub writes: usize,
    /// Chunks that had to be written again (lost or dropped writes).
    pub rewritten: usize,
    /// An existing program was upgraded rather than a new one deployed.
    pub upgraded: bool,
}

/// Progress of the buffer's writes: chunks known written, of all.
pub type WriteProgress<'a> = &'a (dyn Fn(usize, usize) + Send + Sync);

impl ChainClient {
    /// Deploys `elf` as a new program at `program`'s address, paid by
    /// `payer`, which also signs as the buffer's authority; the upgrade
    /// authority is then handed to `upgrade_authority` when that is another
    /// key. Refused when the address already holds an account.
    pub async fn deploy_program(
        &self,
        payer: &Keypair,
        program: &Keypair,
        elf: &[u8],
        upgrade_authority: &Pubkey,
        progress: WriteProgress<'_>,
    ) -> Result<Deployed, ChainError> {
        let program_key = program.pubkey();
        if self.account(&program_key).await?.is_some() {
            return Err(ChainError::Transaction {
                message: format!(
                    "{program_key} already holds an account; upgrade the program instead of deploying it again"
                ),
                logs: Vec::new(),
            });
        }
        let (buffer, writes, rewritten) = self.write_buffer(payer, elf, progress).await?;
        let program_rent = self.rent(UpgradeableLoaderState::size_of_program()).await?;
        let deploy = loader::deploy_with_max_program_len(
            &payer.pubkey(),
            &program_key,
            &buffer,
            &payer.pubkey(),
            program_rent,
            elf.len(),
        )
        .map_err(|e| ChainError::Signing(e.to_string()))?;
        self.send(&deploy, &[payer, program]).await?;
        if *upgrade_authority != payer.pubkey() {
            let hand_over = loader::set_upgrade_authority(
                &program_key,
                &payer.pubkey(),
                Some(upgrade_authority),
            );
            self.send(&[hand_over], &[payer]).await?;
        }
        self.check_deployed(&program_key, elf, upgrade_authority)
            .await?;
        Ok(deployed(
            program_key,
            upgrade_authority,
            elf,
            writes,
            rewritten,
            false,
        ))
    }

    /// Replaces the code of the deployed `program` with `elf`; `authority`
    /// is its upgrade authority and pays for the buffer, whose rent comes
    /// back to it.
    pub async fn upgrade_program(
        &self,
        authority: &Keypair,
        program: &Pubkey,
        elf: &[u8],
        progress: WriteProgress<'_>,
    ) -> Result<Deployed, ChainError> {
        let (buffer, writes, rewritten) = self.write_buffer(authority, elf, progress).await?;
        let upgrade = loader::upgrade(program, &buffer, &authority.pubkey(), &authority.pubkey());
        self.send(&[upgrade], &[authority]).await?;
        self.check_deployed(program, elf, &authority.pubkey())
            .await?;
        Ok(deployed(
            *program,
            &authority.pubkey(),
            elf,
            writes,
            rewritten,
            true,
        ))
    }

    /// The upgrade authority of the deployed `program`: `Ok(None)` when the
    /// address holds no upgradeable program, `Some(None)` when it is immutable.
    pub async fn upgrade_authority(
        &self,
        program: &Pubkey,
    ) -> Result<Option<Option<Pubkey>>, ChainError> {
        // Only the header: the ELF that follows it is the bulk of the account.
        let header = UpgradeableLoaderState::size_of_programdata_metadata();
        let Some(account) = self
            .account_head(&get_program_data_address(program), header)
            .await?
        else {
            return Ok(None);
        };
        match bincode::deserialize::<UpgradeableLoaderState>(&account.data) {
            Ok(UpgradeableLoaderState::ProgramData {
                upgrade_authority_address,
                ..
            }) => Ok(Some(upgrade_authority_address)),
            _ => Ok(None),
        }
    }

    /// Creates a buffer owned by `authority` and writes `elf` into it.
    /// Returns the buffer, the write transactions sent and the chunks
    /// written again.
    async fn write_buffer(
        &self,
        authority: &Keypair,
        elf: &[u8],
        progress: WriteProgress<'_>,
    ) -> Result<(Pubkey, usize, usize), ChainError> {
        let buffer = Keypair::new();
        let key = buffer.pubkey();
        let rent = self
            .rent(UpgradeableLoaderState::size_of_buffer(elf.len()))
            .await?;
        let create = loader::create_buffer(
            &authority.pubkey(),
            &key,
            &authority.pubkey(),
            rent,
            elf.len(),
        )
        .map_err(|e| ChainError::Signing(e.to_string()))?;
        self.send(&create, &[authority, &buffer]).await?;

        let chunk = chunk_len(&authority.pubkey(), &key);
        let chunks: Vec<usize> = (0..elf.len()).step_by(chunk).collect();
        let total = chunks.len();
        let mut pending = chunks.clone();
        let mut writes = 0;
        let mut round = 0;
        let mut stalled = 0;
        while stalled < WRITE_ROUNDS {
            round += 1;
            let started = Instant::now();
            writes += pending.len();
            self.send_writes(authority, &key, elf, chunk, &pending)
                .await?;
            let data = self
                .account(&key)
                .await?
                .map(|account| account.data)
                .unwrap_or_default();
            let written =
                &data[UpgradeableLoaderState::size_of_buffer_metadata().min(data.len())..];
            let before = pending.len();
            pending.retain(|&at| {
                let end = (at + chunk).min(elf.len());
                written.get(at..end) != Some(&elf[at..end])
            });
            tracing::debug!(
                round,
                sent = before,
                missing = pending.len(),
                ms = started.elapsed().as_millis() as u64,
                "buffer write round"
            );
            progress(total - pending.len(), total);
            if pending.is_empty() {
                return Ok((key, writes, writes - total));
            }
            stalled = if pending.len() < before {
                0
            } else {
                stalled + 1
            };
            tracing::info!(
                round,
                missing = pending.len(),
                "buffer writes did not all land; writing them again"
            );
        }
        Err(ChainError::Transaction {
            message: format!(
                "{} of {total} buffer writes had not landed after {round} rounds, the last {WRITE_ROUNDS} landing none; the cluster may be congested (buffer {key} keeps its rent until closed)",
                pending.len()
            ),
            logs: Vec::new(),
        })
    }

    /// Sends the writes of the chunks at `offsets` without preflight, many at
    /// once, then waits until each has landed, failed, or can no longer land.
    async fn send_writes(
        &self,
        authority: &Keypair,
        buffer: &Pubkey,
        elf: &[u8],
        chunk: usize,
        offsets: &[usize],
    ) -> Result<(), ChainError> {
        let config = RpcSendTransactionConfig {
            skip_preflight: true,
            encoding: Some(UiTransactionEncoding::Base64),
            ..Default::default()
        };
        let mut sent: Vec<Result<Signature, ChainError>> = Vec::with_capacity(offsets.len());
        let mut last_blockhash = None;
        for batch in offsets.chunks(WRITES_PER_BLOCKHASH) {
            let blockhash = self
                .rpc
                .get_latest_blockhash()
                .await
                .map_err(|e| self.rpc_error(e))?;
            last_blockhash = Some(blockhash);
            let batch_sent: Vec<_> = stream::iter(batch)
                .map(|&at| {
                    let end = (at + chunk).min(elf.len());
                    let write = loader::write(
                        buffer,
                        &authority.pubkey(),
                        at as u32,
                        elf[at..end].to_vec(),
                    );
                    let ixs = crate::compute::with_unit_limit(&[write]);
                    let tx = Transaction::new_signed_with_payer(
                        &ixs,
                        Some(&authority.pubkey()),
                        &[authority],
                        blockhash,
                    );
                    async move {
                        self.rpc
                            .send_transaction_with_config(&tx, config)
                            .await
                            .map_err(|e| self.rpc_error(e))
                    }
                })
                .buffer_unordered(WRITES_IN_FLIGHT)
                .collect()
                .await;
            sent.extend(batch_sent);
        }
        // A refused send is rewritten next round; only the landed ones are waited for.
        let mut waiting: Vec<Signature> = sent.into_iter().filter_map(Result::ok).collect();
        let started = Instant::now();
        while !waiting.is_empty() && started.elapsed() < self.confirm_timeout {
            let mut still = Vec::new();
            for batch in waiting.chunks(256) {
                let statuses = self
                    .rpc
                    .get_signature_statuses(batch)
                    .await
                    .map_err(|e| self.rpc_error(e))?;
                for (signature, status) in batch.iter().zip(statuses.value) {
                    match status {
                        Some(status) if status.err.is_some() => {
                            let logs = self.transaction_logs(signature).await.unwrap_or_default();
                            return Err(classify(
                                status.err.unwrap_or(TransactionError::AccountNotFound),
                                logs,
                                authority.pubkey(),
                            ));
                        }
                        Some(status) if status.satisfies_commitment(self.commitment) => {}
                        _ => still.push(*signature),
                    }
                }
            }
            waiting = still;
            if waiting.is_empty() {
                break;
            }
            // Once the newest blockhash has expired, nothing still waiting can land.
            if let Some(blockhash) = &last_blockhash
                && self.blockhash_expired(blockhash).await?
            {
                break;
            }
            tokio::time::sleep(self.poll_interval).await;
        }
        Ok(())
    }

    /// The deployed program's bytes are the ELF's, and its upgrade
    /// authority is `authority`.
    async fn check_deployed(
        &self,
        program: &Pubkey,
        elf: &[u8],
        authority: &Pubkey,
    ) -> Result<(), ChainError> {
        let programdata = get_program_data_address(program);
        let data = self
            .account(&programdata)
            .await?
            .map(|account| account.data)
            .unwrap_or_default();
        let start = UpgradeableLoaderState::size_of_programdata_metadata();
        let holds_elf = data.get(start..start + elf.len()) == Some(elf);
        let authority_now = self.upgrade_authority(program).await?;
        if !holds_elf || authority_now != Some(Some(*authority)) {
            return Err(ChainError::Transaction {
                message: format!(
                    "the program at {program} does not hold the ELF with upgrade authority {authority} after deployment (authority on chain: {authority_now:?})"
                ),
                logs: Vec::new(),
            });
        }
        let deployed_in = match bincode::deserialize::<UpgradeableLoaderState>(&data) {
            Ok(UpgradeableLoaderState::ProgramData { slot, .. }) => slot,
            _ => 0,
        };
        self.wait_past_slot(deployed_in).await
    }

    /// Waits until the chain is past `slot`: a program deployed or upgraded
    /// in one slot can be invoked only from a later one (Agave's validator
    /// answers "Unsupported program id" before), so a deployment returns
    /// only once its program can be used.
    async fn wait_past_slot(&self, slot: u64) -> Result<(), ChainError> {
        let started = Instant::now();
        loop {
            let now = self.rpc.get_slot().await.map_err(|e| self.rpc_error(e))?;
            if now > slot {
                return Ok(());
            }
            if started.elapsed() > INVOCABLE_WITHIN {
                return Err(ChainError::Transaction {
                    message: format!(
                        "the chain is still at slot {now}, the program's deployment slot, after {} s: is the validator producing blocks?",
                        INVOCABLE_WITHIN.as_secs()
                    ),
                    logs: Vec::new(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The rent-exempt balance of an account of `len` bytes.
    async fn rent(&self, len: usize) -> Result<u64, ChainError> {
        self.rpc
            .get_minimum_balance_for_rent_exemption(len)
            .await
            .map_err(|e| self.rpc_error(e))
    }
}

fn deployed(
    program: Pubkey,
    authority: &Pubkey,
    elf: &[u8],
    writes: usize,
    rewritten: usize,
    upgraded: bool,
) -> Deployed {
    Deployed {
        program: program.to_string(),
        programdata: get_program_data_address(&program).to_string(),
        upgrade_authority: authority.to_string(),
        elf_bytes: elf.len(),
        writes,
        rewritten,
        upgraded,
    }
}

/// The most ELF bytes one write transaction carries: what is left of a
/// packet once the transaction with an empty write (and its compute-unit
/// limit) is signed.
pub fn chunk_len(authority: &Pubkey, buffer: &Pubkey) -> usize {
    room_in_packet(loader::write(buffer, authority, 0, Vec::new()), authority)
}

/// The bytes a packet has left for `empty_write`'s data (a write carrying
/// none), once it is signed by `payer` behind its compute-unit limit.
pub(super) fn room_in_packet(empty_write: Instruction, payer: &Pubkey) -> usize {
    let tx = Transaction::new_with_payer(
        &crate::compute::with_unit_limit(&[empty_write]),
        Some(payer),
    );
    let empty = bincode::serialized_size(&tx).expect("a transaction serialises") as usize;
    // The byte count's compact-u16 prefix grows by one byte past 127 bytes.
    PACKET_BYTES - empty - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_write_fills_a_packet_and_no_more() {
        let authority = Pubkey::new_unique();
        let buffer = Pubkey::new_unique();
        let len = chunk_len(&authority, &buffer);
        assert!(len > 900, "{len}");
        let write = loader::write(&buffer, &authority, 1 << 20, vec![7; len]);
        let mut tx = Transaction::new_with_payer(
            &crate::compute::with_unit_limit(&[write]),
            Some(&authority),
        );
        tx.signatures = vec![Signature::default()];
        let size = bincode::serialized_size(&tx).unwrap() as usize;
        assert!(size <= PACKET_BYTES && size > PACKET_BYTES - 8, "{size}");
    }
}
