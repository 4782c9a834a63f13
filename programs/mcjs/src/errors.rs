use anchor_lang::prelude::*;

#[error_code]
pub enum McjsError {
    // Authority and identity.
    #[msg("the signer is not the config admin")]
    NotAdmin,
    #[msg("the signer is not the scheduler authority")]
    NotScheduler,
    #[msg("the signer is not the owner of this account")]
    NotOwner,
    #[msg("the signer is not the provider assigned to this job")]
    NotAssignedProvider,
    #[msg("the account does not belong to the given provider")]
    WrongProvider,
    #[msg("the node is not the one assigned to this job")]
    WrongNode,
    #[msg("the mint is not the configured USDC mint")]
    WrongMint,
    #[msg("the token account is not the expected one")]
    WrongTokenAccount,
    #[msg("the program is paused by its admin")]
    ProgramPaused,

    // Configuration.
    #[msg("commission must be at most 10000 basis points")]
    InvalidCommission,
    #[msg("the liveness factor must be at least 1")]
    InvalidLivenessFactor,

    // Amounts.
    #[msg("the amount must be greater than zero")]
    ZeroAmount,
    #[msg("arithmetic overflow")]
    Overflow,
    #[msg("the amount exceeds the stake")]
    InsufficientStake,
    #[msg("the provider's stake is below the minimum required")]
    StakeBelowMinimum,
    #[msg("no stake withdrawal has been requested")]
    NoWithdrawalRequested,
    #[msg("the stake withdrawal cooldown has not elapsed")]
    CooldownNotElapsed,
    #[msg("the provider still has jobs assigned")]
    ActiveAssignments,
    #[msg("the bond does not cover one checkpoint interval at the maximum price")]
    BondTooSmall,

    // Nodes.
    #[msg("a GPU model name must be 1 to 32 bytes")]
    InvalidGpuModel,
    #[msg("the readiness score must be between 0 and 100")]
    InvalidReadiness,
    #[msg("the price per GPU-hour must be greater than zero")]
    InvalidPrice,
    #[msg("the node is not available")]
    NodeNotAvailable,
    #[msg("the node is busy with a job")]
    NodeBusy,
    #[msg("a node's status can be set to available or offline only")]
    InvalidNodeStatus,
    #[msg("the node has fewer GPUs than the job requires")]
    NodeTooFewGpus,
    #[msg("the node's GPUs have less memory than the job requires")]
    NodeVramTooSmall,
    #[msg("the node's GPU compute capability is below the job's minimum")]
    NodeComputeCapabilityTooLow,
    #[msg("the node's GPU model is not in the job's allow-list")]
    NodeGpuModelNotAllowed,
    #[msg("the node cannot write the job's checkpoints fast enough")]
    NodeCheckpointBandwidthTooLow,
    #[msg("the node's price exceeds the job's maximum price")]
    NodePriceTooHigh,

    // Job specification.
    #[msg("a job needs at least one GPU")]
    InvalidGpuCount,
    #[msg("at most 4 GPU models may be allowed, each 1 to 32 bytes")]
    InvalidGpuModelList,
    #[msg("the checkpoint interval must be at least 60 s and at most the maximum duration")]
    InvalidCheckpointInterval,
    #[msg("the deadline is in the past")]
    DeadlineInPast,
    #[msg("the job's deadline has passed")]
    DeadlinePassed,
    #[msg("the job's deadline has not passed")]
    DeadlineNotPassed,
    #[msg("the maximum price must be greater than zero")]
    InvalidMaxPrice,

    // Job state machine.
    #[msg("the job is not in a state that allows this")]
    InvalidJobState,
    #[msg("the job is not pending or recovering")]
    JobNotQueued,
    #[msg("the job is not assigned")]
    JobNotAssigned,
    #[msg("the job is not running")]
    JobNotRunning,
    #[msg("the job is not paused")]
    JobNotPaused,
    #[msg("the job has not reached a terminal state")]
    JobNotFinished,
    #[msg("the generation is stale: the job was reassigned and this node is fenced")]
    StaleGeneration,
    #[msg("a checkpoint must advance past the last attested epoch and step")]
    CheckpointNotAdvancing,
    #[msg("the job has not gone long enough without progress to be reported by anyone")]
    JobNotStalled,
    #[msg("only the scheduler authority may report a job error")]
    JobErrorNeedsScheduler,

    // Appended: codes are positional.
    #[msg("the hardware profile is out of bounds: at least one GPU, sizes within the program's limits")]
    InvalidHardwareProfile,
    #[msg("the node's operator key must be set and must not be the provider's wallet")]
    InvalidOperator,
    #[msg("the signer is not the node's operator key")]
    NotNodeOperator,
    #[msg("the operator key may only report the node's status and measured profile")]
    OperatorNotAllowed,
    #[msg("only the program's upgrade authority may initialise the program")]
    NotUpgradeAuthority,
    #[msg("only a job that ended unfinished (failed, cancelled or expired) after its last failure was its provider's may be compensated")]
    NotCompensable,
    #[msg("the compensation exceeds what the job's owner paid, less what was already compensated")]
    CompensationTooLarge,
    #[msg("the insurance pool holds too little")]
    InsufficientPool,
    #[msg("the sample rate is more than one million parts per million")]
    InvalidSampleRate,
    #[msg("a verification of this job's intervals is still open")]
    VerificationOpen,
    #[msg("this job's payment is held: pass its Segment account")]
    SegmentRequired,
    #[msg("the Segment account is not this assignment's")]
    WrongSegment,
    #[msg("the job does not ask for verification, or the challenge window is 0")]
    VerificationOff,
    #[msg("the interval is not the job's latest, or its challenge window has passed")]
    IntervalNotOpenToVerification,
    #[msg("the slot hash that draws this interval is not in the SlotHashes sysvar (too early or too late)")]
    DrawUnavailable,
    #[msg("the interval was not drawn for verification")]
    NotSampled,
    #[msg("the verifier and the referee must be nodes of two other providers, meeting the job's requirements")]
    InvalidChecker,
    #[msg("this node has no answer to seal or reveal for this verification now")]
    NotVerifierTurn,
    #[msg("the verification is not decided yet")]
    VerificationUndecided,
    #[msg("the segment is not payable yet: its challenge window has not passed or a verification is open")]
    SegmentNotReleasable,
    #[msg("the accounts of the job's current assignment are missing or wrong")]
    WrongAssignment,
    #[msg("a verified job's attestations and completion must be at least the Config's draw_secs apart")]
    AttestationTooSoon,
    #[msg("this provider was proven wrong on this job: it is never assigned it again")]
    ProviderBarred,
    #[msg("the revealed answer does not open this checker's commitment")]
    CommitmentMismatch,
    #[msg("this job id was taken: a job id must exceed every id the owner used before")]
    JobIdTaken,
    #[msg("the checkers must run the GPU model of the node whose attestation they check")]
    CheckerHardwareClass,
    #[msg("an instruction takes exactly the accounts it names: extra accounts are refused")]
    UnexpectedAccounts,
    #[msg("this attestation exhausts the bond and pauses the job: it must name the settlement accounts (provider, job vault, mint, payout, treasury, token program, a writable node)")]
    SettlementAccountsRequired,
    #[msg("another scheduler holds the lease: only its holder assigns, reports and opens verifications (a standby takes over once the lease expires)")]
    NotLeaseHolder,
    #[msg("the scheduler lease is held and has not expired: it cannot be taken yet")]
    LeaseHeld,
    #[msg("a lease lasts at least one slot, names at most four standbys, none twice, and starts at term 1")]
    InvalidLease,
    #[msg("a challenge's sizing is out of range: fill 1-100%, width a multiple of 64 up to 32,768, 1-1,024 passes, 1-256 rows opened, a memory shift of at most 40")]
    InvalidChallengeSizing,
    #[msg("this node is answering a hardware challenge: it takes no job and no new challenge until the verdict is recorded")]
    ChallengeInFlight,
    #[msg("this node has no hardware challenge in flight")]
    NoChallenge,
    #[msg("not this challenge step's turn: the commitment comes first, then the held digest, each once")]
    ChallengeOutOfTurn,
    #[msg("a passing verdict needs both answers, and proves at most the memory the node claims")]
    InvalidChallengeVerdict,
    #[msg("this job names a GPU model or a memory floor, and the node's profile is not proven by a hardware challenge (the Config requires proven hardware)")]
    UnprovenHardware,
    #[msg("an attestation goes with a passing verdict only, names its chip in ASCII letters and digits, and gives a device id for at least one of the node's GPUs and none for a GPU it does not have, no id twice")]
    InvalidAttestation,
    #[msg("this job asks for attested hardware, and the node's standing proof does not have every one of its GPUs attested by NVIDIA")]
    UnattestedHardware,
    #[msg("the job has been billed its whole maximum duration: no more progress is paid or attested; complete it with the output it has, or report it to end it")]
    DurationCapReached,
    #[msg("a scheduler holds a live lease: it alone judges whether a job is late (it knows of the operator's outages); anyone may report a stalled job once the lease has lapsed")]
    SchedulerLive,
    #[msg("a check may still take from this stake: a verified job's payment to this provider is held for its challenge window; withdraw once every held segment is released (anyone may release one when it is due)")]
    SegmentsHeld,
    #[msg("this verified job already holds as many assignments' payments as it may (MAX_LIVE_SEGMENTS) waiting for their challenge windows: it is placed again once one is released")]
    SegmentsFull,
    #[msg("a checker is replaced only while the check is open and before its window ends, once half the window has passed without its sealed answer, at most twice per check")]
    CheckerNotReplaceable,
    #[msg("a second round opens only on a first round whose checkers revealed different answers (or only one revealed), within half the challenge window of the dispute")]
    SecondRoundNotOpen,
    #[msg("this job's output is attested and waits only for its draw and any check of it: no further attestation, report or pause; anyone completes it once the draw gap has passed and no check is open")]
    JobFinishing,
    #[msg("this is not the output the job's node attested: a job completes with the output it attested")]
    OutputMismatch,
    #[msg("the stake withdrawal cooldown must be at least as long as a check can last (7 challenge windows: two rounds of three windows each, and one to open the second): a checker could otherwise withdraw its stake before the check that may slash it resolves")]
    CooldownShorterThanCheck,
    #[msg("a first-round checker the second round proved wrong is slashed when the check is resolved: pass its Provider account and stake vault")]
    CheckerAccountsRequired,
    #[msg("these are not the checkers the pool's draw gives: name the members drawn (in either role), and pass each member drawn before them that cannot check with its node's and provider's accounts, in the order drawn")]
    CheckerNotDrawn,
    #[msg("the checker pool of this GPU model has too few members that could check (after at most MAX_DRAW_SKIPS passed over): the interval is not checked")]
    NoCheckerDrawn,
    #[msg("the checker pool is full and this provider's stake outweighs no member: it enters when a member lapses or a lighter one is outweighed")]
    CheckerPoolFull,
    #[msg("only the program's upgrade authority (the Config's admin where the program has none) may publish its IDL")]
    NotIdlPublisher,
    #[msg("an IDL write lies inside Anchor's IDL account of this program and inside its total length, which is at most MAX_IDL_LEN bytes")]
    IdlWriteOutOfRange,
}
