//! Reading and finding the program's accounts.

use super::*;

/// Which jobs [`ChainClient::jobs`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobFilter {
    All,
    Owner(Pubkey),
    /// By state; the variant's fields are ignored (`JobState::Running { since: 0 }`).
    State(JobState),
    /// Jobs assigned to or running on this node.
    Node(Pubkey),
}

/// A verification a node must act on now, with its job.
#[derive(Debug, Clone)]
pub struct DueCheck {
    pub key: Pubkey,
    pub verification: Verification,
    /// Which checker the node is.
    pub role: mcjs::state::Party,
    pub job: Job,
}

/// The scheduler lease as one read saw it, with the Config (whose
/// scheduler is a member) and the chain's slot, by which the program judges
/// the lease's expiry.
#[derive(Debug, Clone)]
pub struct LeaseView {
    pub lease: mcjs::state::SchedulerLease,
    pub config: Config,
    pub slot: u64,
}

/// The most Verification keys [`ChainClient::checks_named`] reads at once.
pub const MAX_NAMED_CHECKS: usize = 256;

/// The roles in which `node` must act on `v` now: seal while it is open and
/// the node has not sealed, reveal once it is revealing and the node sealed
/// and has not revealed.
pub fn due_roles(v: &Verification, node: &Pubkey) -> Vec<mcjs::state::Party> {
    use mcjs::state::{Party, VerificationState};
    let mut out = Vec::new();
    for role in [Party::Verifier, Party::Referee] {
        let (named, sealed, revealed) = match role {
            Party::Verifier => (
                v.verifier_node == *node,
                v.verifier_commitment.is_some(),
                v.verifier_answer.is_some(),
            ),
            Party::Referee => (
                v.referee_node == *node,
                v.referee_commitment.is_some(),
                v.referee_answer.is_some(),
            ),
        };
        let due = match v.state {
            VerificationState::Open => !sealed,
            VerificationState::Revealing => sealed && !revealed,
            _ => false,
        };
        if named && due {
            out.push(role);
        }
    }
    out
}

impl ChainClient {
    /// The lowest job id `owner` may still use: ids only grow, so a closed
    /// job's address is never taken again (0 before its first job).
    pub async fn next_job_id(&self, owner: &Pubkey) -> Result<u64, ChainError> {
        Ok(self
            .account(&pda::job_counter(owner))
            .await?
            .and_then(|a| decode::job_counter(&a.data).ok())
            .map_or(0, |c| c.next_job_id))
    }

    /// An account, or `None` when it does not exist.
    pub async fn account(&self, key: &Pubkey) -> Result<Option<Account>, ChainError> {
        let response = self
            .rpc
            .get_account_with_commitment(key, self.commitment)
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(response.value.filter(|a| a.lamports > 0))
    }

    /// An account with only the first `len` bytes of its data (a
    /// `dataSlice`), or `None` when it does not exist: for the header of a
    /// large account, such as a program's ProgramData (the whole ELF).
    pub async fn account_head(
        &self,
        key: &Pubkey,
        len: usize,
    ) -> Result<Option<Account>, ChainError> {
        let config = RpcAccountInfoConfig {
            encoding: Some(UiAccountEncoding::Base64),
            data_slice: Some(solana_account_decoder_client_types::UiDataSliceConfig {
                offset: 0,
                length: len,
            }),
            commitment: Some(self.commitment),
            min_context_slot: None,
        };
        let response = self
            .rpc
            .get_ui_account_with_config(key, config)
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(response.value.as_ref().and_then(ui_to_account))
    }

    /// Fails unless the MCJS program is deployed on this node.
    pub async fn check_program(&self) -> Result<(), ChainError> {
        match self.account(&crate::PROGRAM_ID).await? {
            Some(account) if account.executable => Ok(()),
            _ => Err(ChainError::ProgramMissing {
                program: crate::PROGRAM_ID,
                url: self.url.clone(),
            }),
        }
    }

    pub(super) async fn program_account<T>(
        &self,
        key: &Pubkey,
        decode: fn(&[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, ChainError> {
        match self.account(key).await? {
            None => Ok(None),
            Some(account) if account.owner != crate::PROGRAM_ID => Err(ChainError::Decode {
                key: *key,
                source: DecodeError::WrongType {
                    expected: "program-owned",
                },
            }),
            Some(account) => decode(&account.data)
                .map(Some)
                .map_err(|source| ChainError::Decode { key: *key, source }),
        }
    }

    /// The Config account and its address.
    pub async fn config(&self) -> Result<(Pubkey, Config), ChainError> {
        let key = pda::config();
        match self.program_account(&key, decode::config).await? {
            Some(config) => Ok((key, config)),
            None => {
                self.check_program().await?;
                Err(ChainError::NotInitialised {
                    url: self.url.clone(),
                })
            }
        }
    }

    /// The mint and treasury every token-moving instruction needs.
    pub async fn deployment(&self) -> Result<ix::Deployment, ChainError> {
        let (_, config) = self.config().await?;
        Ok(ix::Deployment {
            usdc_mint: config.usdc_mint,
            treasury: config.treasury,
        })
    }

    pub async fn job(&self, key: &Pubkey) -> Result<Option<Job>, ChainError> {
        self.program_account(key, decode::job).await
    }

    pub async fn provider(&self, key: &Pubkey) -> Result<Option<Provider>, ChainError> {
        self.program_account(key, decode::provider).await
    }

    pub async fn node(&self, key: &Pubkey) -> Result<Option<Node>, ChainError> {
        self.program_account(key, decode::node).await
    }

    /// The node and the job it holds now (`Node::current_job`), read by
    /// address, never by scanning the program: one `getMultipleAccounts`
    /// for the node and `hint` (the job it held last time), and one more
    /// read only when it holds another job now. `None` when the node does
    /// not exist.
    pub async fn node_job(
        &self,
        node: &Pubkey,
        hint: Option<Pubkey>,
    ) -> Result<Option<(Node, Option<(Pubkey, Job)>)>, ChainError> {
        let keys: Vec<Pubkey> = std::iter::once(*node).chain(hint).collect();
        let mut read = self
            .rpc
            .get_multiple_accounts_with_commitment(&keys, self.commitment)
            .await
            .map_err(|e| self.rpc_error(e))?
            .value
            .into_iter();
        let decoded =
            |key: &Pubkey, account: Option<Account>| match account.filter(|a| a.lamports > 0) {
                None => Ok(None),
                Some(a) if a.owner != crate::PROGRAM_ID => Err(ChainError::Decode {
                    key: *key,
                    source: DecodeError::WrongType {
                        expected: "program-owned",
                    },
                }),
                Some(a) => Ok(Some(a.data)),
            };
        let Some(data) = decoded(node, read.next().flatten())? else {
            return Ok(None);
        };
        let account =
            decode::node(&data).map_err(|source| ChainError::Decode { key: *node, source })?;
        let Some(current) = account.current_job else {
            return Ok(Some((account, None)));
        };
        let job = match hint {
            Some(h) if h == current => match decoded(&h, read.next().flatten())? {
                Some(data) => Some(
                    decode::job(&data).map_err(|source| ChainError::Decode { key: h, source })?,
                ),
                None => None,
            },
            _ => self.job(&current).await?,
        };
        Ok(Some((account, job.map(|j| (current, j)))))
    }

    pub(super) async fn program_accounts(
        &self,
        kind: AccountKind,
        filters: Vec<RpcFilterType>,
    ) -> Result<Vec<(Pubkey, Vec<u8>)>, ChainError> {
        Ok(self.program_accounts_in_context(kind, filters).await?.1)
    }

    /// The program's accounts of `kind` passing `filters`, with the slot the
    /// node read them at where it says (`withContext`).
    pub(super) async fn program_accounts_in_context(
        &self,
        kind: AccountKind,
        mut filters: Vec<RpcFilterType>,
    ) -> Result<(Option<u64>, Vec<(Pubkey, Vec<u8>)>), ChainError> {
        filters.insert(
            0,
            RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                0,
                decode::discriminator_of(kind).to_vec(),
            )),
        );
        let config = RpcProgramAccountsConfig {
            filters: Some(filters),
            account_config: RpcAccountInfoConfig {
                encoding: Some(UiAccountEncoding::Base64),
                commitment: Some(self.commitment),
                ..Default::default()
            },
            with_context: Some(true),
            ..Default::default()
        };
        let response: OptionalContext<Vec<RpcKeyedAccount>> = self
            .rpc
            .send(
                RpcRequest::GetProgramAccounts,
                json!([crate::PROGRAM_ID.to_string(), config]),
            )
            .await
            .map_err(|e| self.rpc_error(e))?;
        let (slot, keyed) = match response {
            OptionalContext::Context(c) => (Some(c.context.slot), c.value),
            OptionalContext::NoContext(v) => (None, v),
        };
        let accounts = keyed
            .into_iter()
            .map(|k| {
                let key: Pubkey = k
                    .pubkey
                    .parse()
                    .map_err(|_| ChainError::Rpc(format!("malformed pubkey {}", k.pubkey)))?;
                let data = k
                    .account
                    .data
                    .decode()
                    .ok_or_else(|| ChainError::Rpc(format!("undecodable data of {key}")))?;
                Ok((key, data))
            })
            .collect::<Result<_, ChainError>>()?;
        Ok((slot, accounts))
    }

    /// Jobs matching `filter`, found with memcmp filters and checked again after decoding.
    pub async fn jobs(&self, filter: JobFilter) -> Result<Vec<(Pubkey, Job)>, ChainError> {
        let filters = match filter {
            JobFilter::All => vec![],
            JobFilter::Owner(owner) => vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                Job::OWNER_OFFSET,
                owner.to_bytes().to_vec(),
            ))],
            JobFilter::State(state) => vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                Job::STATE_OFFSET,
                vec![state_tag(&state)],
            ))],
            JobFilter::Node(node) => {
                let mut bytes = vec![1u8];
                bytes.extend_from_slice(node.as_ref());
                vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                    Job::NODE_OFFSET,
                    bytes,
                ))]
            }
        };
        let mut jobs: Vec<(Pubkey, Job)> = self
            .program_accounts(AccountKind::Job, filters)
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::job(&data).ok().map(|job| (key, job)))
            .filter(|(_, job)| match filter {
                JobFilter::All => true,
                JobFilter::Owner(owner) => job.owner == owner,
                JobFilter::State(state) => state_tag(&job.state) == state_tag(&state),
                JobFilter::Node(node) => job.node == Some(node),
            })
            .collect();
        jobs.sort_by_key(|(_, job)| (job.submitted_at, job.job_id));
        Ok(jobs)
    }

    /// Every registered node.
    pub async fn nodes(&self) -> Result<Vec<(Pubkey, Node)>, ChainError> {
        let mut nodes: Vec<(Pubkey, Node)> = self
            .program_accounts(AccountKind::Node, vec![])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::node(&data).ok().map(|node| (key, node)))
            .collect();
        nodes.sort_by_key(|(_, n)| (n.provider, n.index));
        Ok(nodes)
    }

    /// The nodes of one Provider account.
    pub async fn nodes_of(&self, provider: &Pubkey) -> Result<Vec<(Pubkey, Node)>, ChainError> {
        // `provider` is the first field after the discriminator.
        let filter = RpcFilterType::Memcmp(Memcmp::new_raw_bytes(8, provider.to_bytes().to_vec()));
        let mut nodes: Vec<(Pubkey, Node)> = self
            .program_accounts(AccountKind::Node, vec![filter])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::node(&data).ok().map(|node| (key, node)))
            .filter(|(_, node)| node.provider == *provider)
            .collect();
        nodes.sort_by_key(|(_, n)| n.index);
        Ok(nodes)
    }

    /// Every verification open, optionally only those naming `node` in
    /// `role`.
    pub async fn verifications(
        &self,
        node: Option<(&Pubkey, mcjs::state::Party)>,
    ) -> Result<Vec<(Pubkey, Verification)>, ChainError> {
        use mcjs::state::Party;
        let filters = match node {
            Some((node, role)) => {
                let offset = match role {
                    Party::Verifier => Verification::VERIFIER_NODE_OFFSET,
                    Party::Referee => Verification::REFEREE_NODE_OFFSET,
                };
                vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                    offset,
                    node.to_bytes().to_vec(),
                ))]
            }
            None => vec![],
        };
        let mut out: Vec<(Pubkey, Verification)> = self
            .program_accounts(AccountKind::Verification, filters)
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::verification(&data).ok().map(|v| (key, v)))
            .collect();
        out.sort_by_key(|(_, v)| (v.job, v.interval));
        Ok(out)
    }

    /// The verifications `node` must act on now, with their jobs: as a
    /// checker, seal an answer while one is open and it has not, reveal it
    /// once both checkers have sealed. Two scans of the program's
    /// Verification accounts: an agent does this only when no scheduler
    /// names its duties ([`Self::checks_named`]).
    pub async fn due_checks(&self, node: &Pubkey) -> Result<Vec<DueCheck>, ChainError> {
        use mcjs::state::Party;
        let mut out = Vec::new();
        for role in [Party::Verifier, Party::Referee] {
            for (key, verification) in self.verifications(Some((node, role))).await? {
                if due_roles(&verification, node).contains(&role)
                    && let Some(job) = self.job(&verification.job).await?
                {
                    out.push(DueCheck {
                        key,
                        verification,
                        role,
                        job,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Of the Verification accounts at `keys` (what a scheduler says `node`
    /// owes), those that really name `node` as a checker whose step is due,
    /// with their jobs: read by address, in one `getMultipleAccounts` for
    /// the verifications and one for their jobs, whatever the keys name.
    /// An account the program does not own, or that is no Verification, is
    /// skipped: the keys come from outside and are trusted for nothing.
    /// At most [`MAX_NAMED_CHECKS`] keys are read.
    pub async fn checks_named(
        &self,
        node: &Pubkey,
        keys: &[Pubkey],
    ) -> Result<Vec<DueCheck>, ChainError> {
        let mut keys = keys.to_vec();
        keys.sort();
        keys.dedup();
        keys.truncate(MAX_NAMED_CHECKS);
        let mut found: Vec<(Pubkey, Verification)> = self
            .program_owned(&keys)
            .await?
            .into_iter()
            .filter_map(|(key, data)| Some((key, decode::verification(&data?).ok()?)))
            .filter(|(_, v)| !due_roles(v, node).is_empty())
            .collect();
        found.sort_by_key(|(_, v)| (v.job, v.interval));
        let mut job_keys: Vec<Pubkey> = found.iter().map(|(_, v)| v.job).collect();
        job_keys.dedup();
        let jobs: std::collections::HashMap<Pubkey, Job> = self
            .program_owned(&job_keys)
            .await?
            .into_iter()
            .filter_map(|(key, data)| Some((key, decode::job(&data?).ok()?)))
            .collect();
        let mut out = Vec::new();
        for (key, verification) in found {
            let Some(job) = jobs.get(&verification.job) else {
                continue;
            };
            for role in due_roles(&verification, node) {
                out.push(DueCheck {
                    key,
                    verification: verification.clone(),
                    role,
                    job: job.clone(),
                });
            }
        }
        Ok(out)
    }

    /// The data of each account at `keys` that exists and the program owns
    /// (`None` for the rest), in one `getMultipleAccounts` per 100 keys.
    async fn program_owned(
        &self,
        keys: &[Pubkey],
    ) -> Result<Vec<(Pubkey, Option<Vec<u8>>)>, ChainError> {
        Ok(self.program_owned_at(keys).await?.1)
    }

    /// As [`Self::program_owned`], with the lowest slot the reads were
    /// made at.
    pub(super) async fn program_owned_at(
        &self,
        keys: &[Pubkey],
    ) -> Result<(u64, Vec<(Pubkey, Option<Vec<u8>>)>), ChainError> {
        let mut out = Vec::with_capacity(keys.len());
        let mut slot = u64::MAX;
        for chunk in keys.chunks(100) {
            let read = self
                .rpc
                .get_multiple_accounts_with_commitment(chunk, self.commitment)
                .await
                .map_err(|e| self.rpc_error(e))?;
            slot = slot.min(read.context.slot);
            out.extend(chunk.iter().zip(read.value).map(|(key, account)| {
                let data = account
                    .filter(|a| a.lamports > 0 && a.owner == crate::PROGRAM_ID)
                    .map(|a| a.data);
                (*key, data)
            }));
        }
        Ok((if out.is_empty() { 0 } else { slot }, out))
    }

    /// The jobs at `keys`, read by address (`getMultipleAccounts`, 100 a
    /// call); closed accounts and what is not a job are left out.
    pub async fn jobs_at(&self, keys: &[Pubkey]) -> Result<Vec<(Pubkey, Job)>, ChainError> {
        Ok(self
            .program_owned(keys)
            .await?
            .into_iter()
            .filter_map(|(key, data)| Some((key, decode::job(&data?).ok()?)))
            .collect())
    }

    /// Every segment payment still held (or refunded and not yet closed).
    pub async fn segments(&self) -> Result<Vec<(Pubkey, Segment)>, ChainError> {
        Ok(self
            .program_accounts(AccountKind::Segment, vec![])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::segment(&data).ok().map(|s| (key, s)))
            .collect())
    }

    /// The SlotHashes sysvar's raw data (what `open_verification` draws from).
    pub async fn slot_hashes(&self) -> Result<Vec<u8>, ChainError> {
        Ok(self
            .account(&anchor_lang::compat::solana_sysvar::slot_hashes::ID)
            .await?
            .map(|a| a.data)
            .unwrap_or_default())
    }

    /// Every registered provider.
    pub async fn providers(&self) -> Result<Vec<(Pubkey, Provider)>, ChainError> {
        Ok(self
            .program_accounts(AccountKind::Provider, vec![])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::provider(&data).ok().map(|p| (key, p)))
            .collect())
    }

    /// The amount held by an SPL token account, in base units.
    pub async fn token_balance(&self, account: &Pubkey) -> Result<u64, ChainError> {
        use anchor_lang::AccountDeserialize;
        let Some(data) = self.account(account).await? else {
            return Err(ChainError::NotFound {
                what: "token account",
                key: *account,
                url: self.url.clone(),
            });
        };
        anchor_spl::token::TokenAccount::try_deserialize_unchecked(&mut &data.data[..])
            .map(|t| t.amount)
            .map_err(|_| ChainError::Rpc(format!("{account} is not a token account")))
    }

    /// Lamports held by an account (0 when it does not exist).
    pub async fn sol_balance(&self, key: &Pubkey) -> Result<u64, ChainError> {
        Ok(self.account(key).await?.map_or(0, |a| a.lamports))
    }

    /// The cluster's clock (`Clock::unix_timestamp`), which the program judges time by.
    pub async fn chain_time(&self) -> Result<i64, ChainError> {
        let account = self.account(&CLOCK).await?.ok_or(ChainError::NotFound {
            what: "the Clock sysvar",
            key: CLOCK,
            url: self.url.clone(),
        })?;
        clock_time(&account.data)
    }

    /// The scheduler lease, the Config and the Clock sysvar's slot, in one
    /// `getMultipleAccounts`.
    pub async fn lease_view(&self) -> Result<LeaseView, ChainError> {
        let (lease_key, config_key) = (pda::lease(), pda::config());
        let read = self
            .rpc
            .get_multiple_accounts_with_commitment(&[lease_key, config_key, CLOCK], self.commitment)
            .await
            .map_err(|e| self.rpc_error(e))?
            .value;
        let mut read = read.into_iter();
        let mut program = |key: Pubkey, what| match read.next().flatten() {
            Some(account) if account.owner == crate::PROGRAM_ID => Ok(account.data),
            _ => Err(ChainError::NotFound {
                what,
                key,
                url: self.url.clone(),
            }),
        };
        let lease = program(lease_key, "the scheduler lease")?;
        let config = program(config_key, "the Config")?;
        let lease = decode::lease(&lease).map_err(|source| ChainError::Decode {
            key: lease_key,
            source,
        })?;
        let config = decode::config(&config).map_err(|source| ChainError::Decode {
            key: config_key,
            source,
        })?;
        let clock = read.next().flatten().ok_or(ChainError::NotFound {
            what: "the Clock sysvar",
            key: CLOCK,
            url: self.url.clone(),
        })?;
        let slot = clock
            .data
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or(ChainError::NotFound {
                what: "the Clock sysvar's slot",
                key: CLOCK,
                url: self.url.clone(),
            })?;
        Ok(LeaseView {
            lease,
            config,
            slot,
        })
    }

    /// The SlotHashes sysvar's raw data and the chain's clock, in one
    /// `getMultipleAccounts`: what a verification round draws from.
    pub async fn draw_sysvars(&self) -> Result<(Vec<u8>, i64), ChainError> {
        let (hashes, now, _) = self.draw_reads(&[]).await?;
        Ok((hashes, now))
    }

    /// [`Self::draw_sysvars`] and the checker pools at `pools` (those
    /// created; `pda::checker_pool` of each GPU model) in the same
    /// `getMultipleAccounts`: everything a verification round's draw reads.
    pub async fn draw_reads(
        &self,
        pools: &[Pubkey],
    ) -> Result<(Vec<u8>, i64, Vec<(Pubkey, mcjs::state::CheckerPool)>), ChainError> {
        let slot_hashes = anchor_lang::compat::solana_sysvar::slot_hashes::ID;
        let mut keys = vec![slot_hashes, CLOCK];
        keys.extend_from_slice(pools);
        let mut read = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            read.extend(
                self.rpc
                    .get_multiple_accounts_with_commitment(chunk, self.commitment)
                    .await
                    .map_err(|e| self.rpc_error(e))?
                    .value,
            );
        }
        let mut read = read.into_iter();
        let hashes = read.next().flatten().map(|a| a.data).unwrap_or_default();
        let clock = read.next().flatten().ok_or(ChainError::NotFound {
            what: "the Clock sysvar",
            key: CLOCK,
            url: self.url.clone(),
        })?;
        let pools = pools
            .iter()
            .zip(read)
            .filter_map(|(key, account)| {
                let account = account.filter(|a| a.lamports > 0 && a.owner == crate::PROGRAM_ID)?;
                Some((*key, decode::checker_pool(&account.data).ok()?))
            })
            .collect();
        Ok((hashes, clock_time(&clock.data)?, pools))
    }
}

const CLOCK: Pubkey = Pubkey::from_str_const("SysvarC1ock11111111111111111111111111111111");

/// The unix time in the Clock sysvar's data.
fn clock_time(data: &[u8]) -> Result<i64, ChainError> {
    // slot u64, epoch_start_timestamp i64, epoch u64, leader_schedule_epoch u64, unix_timestamp i64
    data.get(32..40)
        .and_then(|b| b.try_into().ok())
        .map(i64::from_le_bytes)
        .ok_or_else(|| ChainError::Rpc("the Clock sysvar is malformed".into()))
}
