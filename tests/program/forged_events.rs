//! Anyone may send a transaction that invokes a program of their own beside
//! (or instead of) MCJS and names a job's account. What that program logs,
//! even the exact bytes of an MCJS event, is not in the job's history.

use anchor_lang::Event;
use mcjs::events::CheckpointAttested;
use mcjs_client::history::McjsEvent;
use mcjs_client::{Instruction, Pubkey};
use solana_program_runtime::solana_sbpf::program::BuiltinFunctionDefinition;
use solana_program_runtime::stable_log;
use solana_signer::Signer;

use crate::harness::*;

// A one-line program: logs its instruction data as `Program data:`.
solana_program_runtime::declare_process_instruction!(EchoData, 150, |invoke_context| {
    let data = invoke_context
        .transaction_context
        .get_current_instruction_context()?
        .get_instruction_data()
        .to_vec();
    stable_log::program_data(&invoke_context.get_log_collector(), &[&data]);
    Ok(())
});

fn echo_program() -> Pubkey {
    Pubkey::new_from_array([0xec; 32])
}

/// The forger's instruction: the job's account listed, a made-up
/// attestation as data.
fn forged(job: Pubkey, node: Pubkey, step: u64) -> Instruction {
    let fake = CheckpointAttested {
        job,
        node,
        generation: 1,
        epoch: 0,
        step,
        checkpoint_hash: [0x66; 32],
        chain: [0x66; 32],
        accrued: 0,
        by: node,
        at: 0,
    };
    Instruction {
        program_id: echo_program(),
        accounts: vec![
            anchor_lang::solana_program::instruction::AccountMeta::new_readonly(job, false),
        ],
        data: fake.data(),
    }
}

/// The steps of the MCJS events the echo program logged, read as its own.
fn forged_steps(logs: &[String]) -> Vec<u64> {
    mcjs_client::events::data_lines_of(logs, &echo_program())
        .iter()
        .filter_map(|data| match McjsEvent::decode(data)? {
            McjsEvent::CheckpointAttested(e) => Some(e.step),
            _ => None,
        })
        .collect()
}

#[test]
fn another_programs_copy_of_an_mcjs_event_is_not_in_the_jobs_history() {
    let mut env = Env::new();
    env.svm.add_builtin(
        echo_program(),
        <EchoData as BuiltinFunctionDefinition<_>>::register,
    );
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);

    // Alone, sent by a stranger.
    let stranger = env.wallet(0);
    let logs = env
        .send(&[forged(job, provider.nodes[0], 999)], &[&stranger.kp])
        .expect("the forger's program runs");
    assert_eq!(forged_steps(&logs), [999], "the forged line is in the logs");
    assert!(events::<CheckpointAttested>(&logs).is_empty(), "{logs:#?}");
    assert!(McjsEvent::all_in_logs(&logs).is_empty());

    // Around a genuine attestation, in the node's own transaction.
    let operator = provider.operator(0).insecure_clone();
    let attest = env.job_accounts(&job, &provider, 0, &job, 1).attest(
        &operator.pubkey(),
        env.attest_needs_settlement(&job),
        0,
        10,
        checkpoint_hash(0, 10),
    );
    let logs = env
        .send(
            &[
                forged(job, provider.nodes[0], 998),
                attest,
                forged(job, provider.nodes[0], 997),
            ],
            &[&operator],
        )
        .expect("attest");
    let attested = events::<CheckpointAttested>(&logs);
    assert_eq!(
        attested.iter().map(|e| e.step).collect::<Vec<_>>(),
        [10],
        "{logs:#?}"
    );
    assert_eq!(attested[0].checkpoint_hash, checkpoint_hash(0, 10));
    assert_eq!(forged_steps(&logs), [998, 997]);
}
