//! Naming program errors: `JobNotRunning`, not `custom program error: 0x1771`.

use mcjs::errors::McjsError;

/// Anchor numbers a program's own errors from this offset.
pub const ERROR_CODE_OFFSET: u32 = anchor_lang::error::ERROR_CODE_OFFSET;

/// The error a custom program error code stands for, with its message.
pub fn describe(code: u32) -> Option<(String, String)> {
    if code >= ERROR_CODE_OFFSET {
        let index = code - ERROR_CODE_OFFSET;
        return MCJS_ERRORS
            .get(index as usize)
            .map(|e| (format!("{e:?}"), e.to_string()));
    }
    framework_error(code).map(|e| (format!("{e:?}"), e.to_string()))
}

/// The code a program error is reported with.
pub fn code_of(error: McjsError) -> u32 {
    ERROR_CODE_OFFSET + error as u32
}

macro_rules! framework_errors {
    ($($name:ident),* $(,)?) => {
        fn framework_error(code: u32) -> Option<anchor_lang::error::ErrorCode> {
            use anchor_lang::error::ErrorCode;
            $(if code == ErrorCode::$name as u32 {
                return Some(ErrorCode::$name);
            })*
            None
        }
    };
}

framework_errors![
    InstructionMissing,
    InstructionFallbackNotFound,
    InstructionDidNotDeserialize,
    InstructionDidNotSerialize,
    IdlInstructionStub,
    IdlInstructionInvalidProgram,
    IdlAccountNotEmpty,
    EventInstructionStub,
    ConstraintMut,
    ConstraintHasOne,
    ConstraintSigner,
    ConstraintRaw,
    ConstraintOwner,
    ConstraintRentExempt,
    ConstraintSeeds,
    ConstraintExecutable,
    ConstraintState,
    ConstraintAssociated,
    ConstraintAssociatedInit,
    ConstraintClose,
    ConstraintAddress,
    ConstraintZero,
    ConstraintTokenMint,
    ConstraintTokenOwner,
    ConstraintMintMintAuthority,
    ConstraintMintFreezeAuthority,
    ConstraintMintDecimals,
    ConstraintSpace,
    ConstraintAccountIsNone,
    ConstraintTokenTokenProgram,
    ConstraintMintTokenProgram,
    ConstraintAssociatedTokenTokenProgram,
    ConstraintMintGroupPointerExtension,
    ConstraintMintGroupPointerExtensionAuthority,
    ConstraintMintGroupPointerExtensionGroupAddress,
    ConstraintMintGroupMemberPointerExtension,
    ConstraintMintGroupMemberPointerExtensionAuthority,
    ConstraintMintGroupMemberPointerExtensionMemberAddress,
    ConstraintMintMetadataPointerExtension,
    ConstraintMintMetadataPointerExtensionAuthority,
    ConstraintMintMetadataPointerExtensionMetadataAddress,
    ConstraintMintCloseAuthorityExtension,
    ConstraintMintCloseAuthorityExtensionAuthority,
    ConstraintMintPermanentDelegateExtension,
    ConstraintMintPermanentDelegateExtensionDelegate,
    ConstraintMintTransferHookExtension,
    ConstraintMintTransferHookExtensionAuthority,
    ConstraintMintTransferHookExtensionProgramId,
    ConstraintDuplicateMutableAccount,
    AccountAlreadyMigrated,
    AccountNotMigrated,
    ConstraintMintPausableExtension,
    ConstraintMintPausableAuthority,
    RequireViolated,
    RequireEqViolated,
    RequireKeysEqViolated,
    RequireNeqViolated,
    RequireKeysNeqViolated,
    RequireGtViolated,
    RequireGteViolated,
    AccountDiscriminatorAlreadySet,
    AccountDiscriminatorNotFound,
    AccountDiscriminatorMismatch,
    AccountDidNotDeserialize,
    AccountDidNotSerialize,
    AccountNotEnoughKeys,
    AccountNotMutable,
    AccountOwnedByWrongProgram,
    InvalidProgramId,
    InvalidProgramExecutable,
    AccountNotSigner,
    AccountNotSystemOwned,
    AccountNotInitialized,
    AccountNotProgramData,
    AccountNotAssociatedTokenAccount,
    AccountSysvarMismatch,
    AccountReallocExceedsLimit,
    AccountDuplicateReallocs,
    DeclaredProgramIdMismatch,
    TryingToInitPayerAsProgramAccount,
    InvalidNumericConversion,
    Deprecated,
];

macro_rules! all_errors {
    ($($name:ident),* $(,)?) => {
        const MCJS_ERRORS: &[McjsError] = &[$(McjsError::$name),*];
    };
}

all_errors![
    NotAdmin,
    NotScheduler,
    NotOwner,
    NotAssignedProvider,
    WrongProvider,
    WrongNode,
    WrongMint,
    WrongTokenAccount,
    ProgramPaused,
    InvalidCommission,
    InvalidLivenessFactor,
    ZeroAmount,
    Overflow,
    InsufficientStake,
    StakeBelowMinimum,
    NoWithdrawalRequested,
    CooldownNotElapsed,
    ActiveAssignments,
    BondTooSmall,
    InvalidGpuModel,
    InvalidReadiness,
    InvalidPrice,
    NodeNotAvailable,
    NodeBusy,
    InvalidNodeStatus,
    NodeTooFewGpus,
    NodeVramTooSmall,
    NodeComputeCapabilityTooLow,
    NodeGpuModelNotAllowed,
    NodeCheckpointBandwidthTooLow,
    NodePriceTooHigh,
    InvalidGpuCount,
    InvalidGpuModelList,
    InvalidCheckpointInterval,
    DeadlineInPast,
    DeadlinePassed,
    DeadlineNotPassed,
    InvalidMaxPrice,
    InvalidJobState,
    JobNotQueued,
    JobNotAssigned,
    JobNotRunning,
    JobNotPaused,
    JobNotFinished,
    StaleGeneration,
    CheckpointNotAdvancing,
    JobNotStalled,
    JobErrorNeedsScheduler,
    InvalidHardwareProfile,
    InvalidOperator,
    NotNodeOperator,
    OperatorNotAllowed,
    NotUpgradeAuthority,
    NotCompensable,
    CompensationTooLarge,
    InsufficientPool,
    InvalidSampleRate,
    VerificationOpen,
    SegmentRequired,
    WrongSegment,
    VerificationOff,
    IntervalNotOpenToVerification,
    DrawUnavailable,
    NotSampled,
    InvalidChecker,
    NotVerifierTurn,
    VerificationUndecided,
    SegmentNotReleasable,
    WrongAssignment,
    AttestationTooSoon,
    ProviderBarred,
    CommitmentMismatch,
    JobIdTaken,
    CheckerHardwareClass,
    UnexpectedAccounts,
    SettlementAccountsRequired,
    NotLeaseHolder,
    LeaseHeld,
    InvalidLease,
    InvalidChallengeSizing,
    ChallengeInFlight,
    NoChallenge,
    ChallengeOutOfTurn,
    InvalidChallengeVerdict,
    UnprovenHardware,
    InvalidAttestation,
    UnattestedHardware,
    DurationCapReached,
    SchedulerLive,
    SegmentsHeld,
    SegmentsFull,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_error_is_named_by_its_code() {
        for (i, e) in MCJS_ERRORS.iter().enumerate() {
            assert_eq!(*e as usize, i, "the list must follow the enum's order");
            let (name, _) = describe(code_of(*e)).unwrap();
            assert_eq!(name, format!("{e:?}"));
        }
        assert_eq!(describe(6000 + 41).unwrap().0, "JobNotRunning");
        assert!(describe(6000 + MCJS_ERRORS.len() as u32).is_none());
    }

    #[test]
    fn anchor_framework_errors_are_named_too() {
        assert_eq!(describe(2006).unwrap().0, "ConstraintSeeds");
    }
}
