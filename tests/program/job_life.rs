//! A job's life through every instruction, with balances and events checked.

use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::ix;
use solana_signer::Signer;

use crate::harness::*;

#[test]
fn a_job_runs_checkpoints_completes_and_settles() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], 2 * USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    assert_eq!(env.balance(&owner.token), 900 * USDC);
    assert!(matches!(env.job(&job).state, JobState::Pending { since } if since == START_TIME));

    let logs = env.assign(&job, &provider, 0).unwrap();
    let assigned = events::<JobAssigned>(&logs);
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].generation, 1);
    assert_eq!(assigned[0].rate_per_hour, 8 * USDC, "2 USDC × 4 GPUs");
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Busy);

    env.warp(120); // staging data: never billed
    env.start(&job, &provider, 0).unwrap();
    let mut records = Vec::new();
    for (epoch, step) in [(0u32, 100u64), (1, 200), (2, 300)] {
        env.warp(900);
        let logs = env.attest(&job, &provider, 0, 1, epoch, step).unwrap();
        let attested = events::<CheckpointAttested>(&logs);
        assert_eq!(attested.len(), 1, "one event per attestation");
        records.push((1, epoch, step, checkpoint_hash(epoch, step)));
        assert_eq!(attested[0].chain, chain_of(&records));
    }
    let state = env.job(&job);
    assert_eq!(state.checkpoint_count, 3);
    assert_eq!(state.checkpoint_chain, chain_of(&records));
    assert_eq!(state.accrued, 6 * USDC, "45 minutes at 8 USDC/h");

    env.warp(600);
    let logs = env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    let completed = events::<JobCompleted>(&logs);
    assert_eq!(completed.len(), 1);
    let settled = events::<SegmentSettled>(&logs);
    // 55 minutes at 8 USDC/h = 7.333333 USDC; 5% commission.
    let paid = 7_333_333;
    let commission = paid * 500 / 10_000;
    assert_eq!(settled[0].provider_amount + settled[0].commission, paid);
    assert_eq!(env.balance(&provider.payout), paid - commission);
    assert_eq!(env.balance(&env.treasury.clone()), commission);
    assert_eq!(env.balance(&owner.token), 1_000 * USDC - paid);
    assert_eq!(completed[0].refund, 100 * USDC - paid);

    let done = env.job(&job);
    assert!(matches!(done.state, JobState::Completed { .. }));
    assert_eq!(done.bond, 0);
    assert_eq!(done.output_hash, Some([0xee; 32]));
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);
    let p = env.provider(&provider.pda);
    assert_eq!((p.jobs_completed, p.active_assignments), (1, 0));
    env.assert_invariants();
}
