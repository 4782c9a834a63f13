//! Warm standbys in the daemon's rounds: what each spec asks (read once per
//! spec hash, after the round's transactions), and the round's choice
//! published to agents (`GET /v1/standby/{node}`) and to the store gate.

use super::*;

impl<C: DaemonChain> Daemon<C> {
    /// Publishes the round's standbys to the agents and the store gate,
    /// logging each change.
    pub(super) fn name_standbys(
        &self,
        standbys: &crate::standby::Standbys,
        jobs: &[(Pubkey, Job)],
        memory: &mut Memory,
    ) {
        for (job, node) in standbys.iter() {
            if memory.standbys.node_of(job) != Some(*node) {
                info!(%job, %node, "warm standby named");
            }
        }
        for (job, node) in memory.standbys.iter() {
            if standbys.node_of(job).is_none() {
                debug!(%job, %node, "warm standby released");
            }
        }
        memory.standbys = standbys.clone();
        *self.standbys.write().expect("standbys lock") = StandbyBook::new(standbys, jobs);
    }

    /// Reads the specs of jobs on nodes not read yet, for whether they ask
    /// for a standby (after the round's transactions: a spec read never
    /// delays a placement). A spec that cannot be read is tried next round.
    pub(super) async fn read_standby_wishes(&self, jobs: &[(Pubkey, Job)], memory: &mut Memory) {
        let unread: HashSet<[u8; 32]> = jobs
            .iter()
            .filter(|(_, job)| crate::standby::stands_by_for(job))
            .map(|(_, job)| job.spec_hash)
            .filter(|hash| !memory.spec_wants_standby.contains_key(hash))
            .collect();
        for hash in unread {
            match self.read_spec(hash).await {
                Ok(Some(spec)) => {
                    memory
                        .spec_wants_standby
                        .insert(hash, spec.checkpoint.standby);
                }
                // Not there or not valid: its job cannot run, and asks nothing.
                Ok(None) => {
                    memory.spec_wants_standby.insert(hash, false);
                }
                Err(e) => {
                    debug!(spec = %hex::encode(hash), error = %e, "cannot read a spec; trying next round")
                }
            }
        }
    }

    /// The spec of `hash` from the deployment's store, if there and valid.
    async fn read_spec(&self, hash: [u8; 32]) -> Result<Option<mcjs_spec::JobSpec>, String> {
        let path = mcjs_protocol::store::layout::spec(&hash);
        let bytes = match (&self.s3, &self.config.store) {
            (Some(s3), _) => s3
                .get(&path, mcjs_protocol::store::MAX_SPEC_BYTES)
                .await
                .map_err(|e| e.to_string())?,
            (None, StoreUrl::Dir(dir)) => match tokio::fs::read(dir.join(&path)).await {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e.to_string()),
            },
            (None, StoreUrl::S3(_)) => return Err("no credentials for the store".into()),
        };
        Ok(bytes
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|text| mcjs_spec::JobSpec::from_json(text).ok())
            .filter(|spec| mcjs_spec::spec_hash(spec) == hash))
    }
}
