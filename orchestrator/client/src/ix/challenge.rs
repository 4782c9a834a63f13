//! The hardware challenge's instructions (docs/hardware-challenge.md).

use super::*;

/// The scheduler (the lease holder) challenges a free node's hardware.
pub fn request_challenge(
    scheduler: &Pubkey,
    node: &Pubkey,
    sizing: mcjs::state::ChallengeSizing,
) -> Instruction {
    build(
        acc::RequestChallenge {
            scheduler: *scheduler,
            config: pda::config(),
            lease: pda::lease(),
            node: *node,
        },
        data::RequestChallenge {
            args: args::RequestChallengeArgs { sizing },
        },
    )
}

/// `authority` is the node's operator key: its commitment, then its held
/// digest.
pub fn answer_challenge(
    authority: &Pubkey,
    node: &Pubkey,
    step: mcjs::state::ChallengeStep,
) -> Instruction {
    build(
        acc::AnswerChallenge {
            authority: *authority,
            node: *node,
            slot_hashes: anchor_lang::compat::solana_sysvar::slot_hashes::ID,
        },
        data::AnswerChallenge {
            args: args::AnswerChallengeArgs { step },
        },
    )
}

/// The scheduler (the lease holder, as the checker) records its verdict, and with a pass what
/// NVIDIA's attestation proved of the node's GPUs (`challenge::attestation_on_chain`).
pub fn record_challenge(
    scheduler: &Pubkey,
    node: &Pubkey,
    verdict: mcjs::state::ChallengeVerdict,
    attestation: Option<mcjs::state::GpuAttestation>,
) -> Instruction {
    build(
        acc::RecordChallenge {
            scheduler: *scheduler,
            config: pda::config(),
            lease: pda::lease(),
            node: *node,
            slot_hashes: anchor_lang::compat::solana_sysvar::slot_hashes::ID,
        },
        data::RecordChallenge {
            args: args::RecordChallengeArgs {
                verdict,
                attestation,
            },
        },
    )
}
