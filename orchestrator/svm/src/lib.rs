//! Runs the MCJS program inside LiteSVM: natively, or as its SBF build.
//!
//! Natively, for tests and the local chain, the program is compiled as an
//! ordinary Rust crate and registered as a builtin: fast to build, debuggable,
//! counted by coverage. [`add_mcjs_program_from_env`] loads the SBF ELF that
//! `scripts/build-sbf.sh` builds instead when `MCJS_PROGRAM_SO` names it: the
//! bytecode a cluster runs, through the upgradeable loader and its verifier.
//! Two bridges make the native program behave as it would on a cluster:
//!
//! * [`mcjs_builtin`] turns the program's `fn(&Pubkey, &[AccountInfo], &[u8])`
//!   entrypoint into a runtime builtin: the instruction's accounts are
//!   serialised with the SBF ABI, the program runs on them, and the changes are
//!   written back.
//! * [`HostSyscalls`] is installed as the syscall stubs of `solana-sysvar` 3,
//!   the version anchor-lang 1.2 calls into. It forwards cross-program
//!   invocations (the SPL Token program executing as an SBF program in the
//!   same runtime), sysvars, return data, and routes `sol_log`/`sol_log_data`
//!   into the transaction's log collector, so events appear in transaction
//!   logs exactly as on a real cluster.

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    mem::transmute,
    panic::AssertUnwindSafe,
    ptr,
    sync::{Arc, Once, OnceLock},
};

use litesvm::LiteSVM;
use solana_account_info::AccountInfo;
use solana_instruction::{
    Instruction,
    error::{InstructionError, UNSUPPORTED_SYSVAR},
};
use solana_program_entrypoint::{ProcessInstruction, SUCCESS, deserialize};
use solana_program_error::{ProgramError, ProgramResult};
use solana_program_runtime::{
    invoke_context::{BuiltinFunctionRegisterer, InvokeContext},
    serialization::serialize_parameters,
    stable_log,
};
use solana_pubkey::Pubkey;
use solana_sbpf::{
    error::EbpfError, program::BuiltinFunctionDefinition, vm::EncryptedHostAddressToEbpfVm,
};
use solana_svm_timings::ExecuteTimings;
use solana_transaction_context::IndexOfAccount;

/// The MCJS program id, as the program declares it.
pub const PROGRAM_ID: Pubkey = mcjs::ID;

thread_local! {
    static INVOKE_CONTEXT: RefCell<Option<usize>> = const { RefCell::new(None) };
}

fn set_invoke_context(new: &mut InvokeContext) {
    INVOKE_CONTEXT.with(|slot| {
        slot.replace(Some(ptr::from_mut(new).expose_provenance()));
    });
}

fn invoke_context<'a, 'b>() -> &'a mut InvokeContext<'b, 'b> {
    let addr = INVOKE_CONTEXT.with(|slot| {
        slot.borrow()
            .expect("a native program made a syscall outside of an instruction")
    });
    // SAFETY: the pointer was stored by `invoke_native` for the instruction
    // that is executing on this thread, and outlives the program call.
    unsafe { &mut *ptr::with_exposed_provenance_mut(addr) }
}

/// Runs a native entrypoint over the current instruction's accounts.
fn invoke_native(
    entrypoint: ProcessInstruction,
    invoke_context: &mut InvokeContext,
) -> Result<u64, Box<dyn std::error::Error>> {
    set_invoke_context(invoke_context);

    let transaction_context = &invoke_context.transaction_context;
    let instruction_context = transaction_context.get_current_instruction_context()?;
    let account_indices: HashSet<IndexOfAccount> =
        (0..instruction_context.get_number_of_instruction_accounts()).collect();

    invoke_context.compute_meter.consume_checked(1)?;
    // The runtime logs the invocation, its success and its failure itself.

    let direct_pointers = invoke_context
        .get_feature_set()
        .direct_account_pointers_in_program_input;
    let (mut parameter_bytes, ..) =
        serialize_parameters(&instruction_context, false, false, direct_pointers)?;
    // SAFETY: the buffer was just produced by the runtime's own SBF serialiser.
    let (program_id, account_infos, input) =
        unsafe { deserialize(&mut parameter_bytes.as_slice_mut()[0] as *mut u8) };

    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        entrypoint(program_id, &account_infos, input)
    }));
    let result = match outcome {
        Ok(result) => result.map_err(|err| InstructionError::from(u64::from(err))),
        Err(_) => Err(InstructionError::ProgramFailedToComplete),
    };
    result?;

    let by_key: HashMap<_, _> = account_infos.into_iter().map(|a| (a.key, a)).collect();
    // A CPI may have replaced the stored context; look it up again.
    let transaction_context = &invoke_context.transaction_context;
    let instruction_context = transaction_context.get_current_instruction_context()?;
    for index in account_indices {
        let mut account = instruction_context.try_borrow_instruction_account(index)?;
        if !account.is_writable() {
            continue;
        }
        let Some(info) = by_key.get(account.get_key()) else {
            continue;
        };
        if account.get_lamports() != info.lamports() {
            account.set_lamports(info.lamports())?;
        }
        if account.can_data_be_resized(info.data_len()).is_ok() {
            account.set_data_from_slice(&info.data.borrow())?;
        }
        if account.get_owner() != info.owner {
            account.set_owner(info.owner.as_ref())?;
        }
    }
    Ok(0)
}

/// Anchor's generated `entry` wants the accounts slice and its elements to
/// share one lifetime; the builtin signature does not promise that.
fn mcjs_entry(program_id: &Pubkey, accounts: &[AccountInfo], data: &[u8]) -> ProgramResult {
    // SAFETY: only the lifetime parameter changes; the infos live for the call.
    let accounts: &[AccountInfo<'_>] = unsafe { transmute(accounts) };
    mcjs::entry(program_id, accounts, data)
}

struct McjsBuiltin;

impl BuiltinFunctionDefinition<InvokeContext<'_, '_>> for McjsBuiltin {
    type Error = Box<dyn std::error::Error>;

    fn rust(
        _: &mut InvokeContext<'_, '_>,
        _: u64,
        _: u64,
        _: u64,
        _: u64,
        _: u64,
    ) -> Result<u64, Self::Error> {
        unreachable!("a native builtin is only ever entered through `vm`")
    }

    fn vm(
        mut vm: EncryptedHostAddressToEbpfVm<InvokeContext>,
        _: u64,
        _: u64,
        _: u64,
        _: u64,
        _: u64,
    ) {
        // SAFETY: the runtime hands us its own VM for the builtin call.
        unsafe {
            vm.with_vm(|vm| {
                vm.program_result = invoke_native(mcjs_entry, vm.context())
                    .map_err(EbpfError::SyscallError)
                    .into();
            });
        }
    }
}

/// The registerer LiteSVM (and surfpool's LiteSVM) needs for the MCJS program.
pub fn mcjs_builtin() -> BuiltinFunctionRegisterer {
    <McjsBuiltin as BuiltinFunctionDefinition<_>>::register
}

/// Registers the MCJS program (and the syscall bridge) in a LiteSVM instance.
pub fn add_mcjs_program(svm: &mut LiteSVM) {
    install_syscall_stubs();
    svm.add_builtin(PROGRAM_ID, mcjs_builtin());
}

/// Names an SBF build of the program (`scripts/build-sbf.sh` prints one) for
/// [`add_mcjs_program_from_env`] to load instead of the native builtin.
pub const PROGRAM_SO_VAR: &str = "MCJS_PROGRAM_SO";

/// The upgradeable BPF loader, which deploys programs on a cluster.
pub const UPGRADEABLE_LOADER_ID: Pubkey =
    Pubkey::from_str_const("BPFLoaderUpgradeab1e11111111111111111111111");

/// The program's SBF ELF named by [`PROGRAM_SO_VAR`], read once per process;
/// `None` when the variable is unset or empty.
///
/// # Panics
/// When the variable names a file that cannot be read: a test run asked for
/// the bytecode must not quietly fall back to the native program.
pub fn program_elf_from_env() -> Option<&'static [u8]> {
    static ELF: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    ELF.get_or_init(|| {
        let path = std::env::var_os(PROGRAM_SO_VAR).filter(|p| !p.is_empty())?;
        Some(
            std::fs::read(&path)
                .unwrap_or_else(|err| panic!("{PROGRAM_SO_VAR}={}: {err}", path.to_string_lossy())),
        )
    })
    .as_deref()
}

/// Adds the MCJS program: the SBF ELF named by [`PROGRAM_SO_VAR`] when it is
/// set (see [`add_mcjs_elf`]), else the native builtin ([`add_mcjs_program`]).
/// `upgrade_authority` is the ELF's upgrade authority; the native builtin has
/// none (it is not deployed by the upgradeable loader).
///
/// # Panics
/// When the ELF cannot be read or fails the loader's verifier.
pub fn add_mcjs_program_from_env(svm: &mut LiteSVM, upgrade_authority: &Pubkey) {
    match program_elf_from_env() {
        Some(elf) => add_mcjs_elf(svm, elf, Some(upgrade_authority))
            .unwrap_or_else(|err| panic!("loading {PROGRAM_SO_VAR}: {err}")),
        None => add_mcjs_program(svm),
    }
}

/// Deploys the program's SBF ELF as a cluster does: through the upgradeable
/// loader (LiteSVM runs the bytecode verifier on it), with a programdata
/// account naming `upgrade_authority`, which `initialize` checks.
pub fn add_mcjs_elf(
    svm: &mut LiteSVM,
    elf: &[u8],
    upgrade_authority: Option<&Pubkey>,
) -> Result<(), litesvm::error::LiteSVMError> {
    svm.add_program(PROGRAM_ID, elf)?;
    let (programdata, _) =
        Pubkey::find_program_address(&[PROGRAM_ID.as_ref()], &UPGRADEABLE_LOADER_ID);
    let mut account = svm
        .get_account(&programdata)
        .expect("add_program creates the programdata account");
    // UpgradeableLoaderState::ProgramData in bincode: the variant (u32 = 3),
    // the deployment slot (u64), then Option<Pubkey> (a tag byte, 32 bytes).
    let header = &mut account.data[..PROGRAMDATA_HEADER_LEN];
    assert_eq!(header[..4], 3u32.to_le_bytes(), "not a ProgramData account");
    match upgrade_authority {
        Some(key) => {
            header[12] = 1;
            header[13..].copy_from_slice(key.as_ref());
        }
        None => header[12..].fill(0),
    }
    svm.set_account(programdata, account)
}

/// The programdata account's metadata before the ELF.
const PROGRAMDATA_HEADER_LEN: usize = 4 + 8 + 1 + 32;

/// Installs [`HostSyscalls`] as the process-wide stubs of `solana-sysvar` 3.
/// Idempotent.
pub fn install_syscall_stubs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        solana_sysvar_v3::program_stubs::set_syscall_stubs(Box::new(HostSyscalls));
    });
}

fn write_sysvar<T: Clone>(sysvar: Result<Arc<T>, InstructionError>, var_addr: *mut u8) -> u64 {
    match sysvar {
        // SAFETY: the caller passes a pointer to a `T`, as the syscall requires.
        Ok(value) => unsafe {
            *(var_addr as *mut T) = T::clone(&value);
            SUCCESS
        },
        Err(_) => UNSUPPORTED_SYSVAR,
    }
}

/// Syscalls of a native program, served by the runtime that executes it.
pub struct HostSyscalls;

impl solana_sysvar_v3::program_stubs::SyscallStubs for HostSyscalls {
    fn sol_log(&self, message: &str) {
        stable_log::program_log(&invoke_context().get_log_collector(), message);
    }

    fn sol_log_data(&self, fields: &[&[u8]]) {
        stable_log::program_data(&invoke_context().get_log_collector(), fields);
    }

    fn sol_invoke_signed(
        &self,
        instruction: &Instruction,
        account_infos: &[AccountInfo],
        signers_seeds: &[&[&[u8]]],
    ) -> ProgramResult {
        let invoke_context = invoke_context();
        let caller = invoke_context
            .transaction_context
            .get_current_instruction_context()
            .and_then(|ctx| ctx.get_program_key().copied())
            .map_err(|_| ProgramError::InvalidArgument)?;

        let signers = signers_seeds
            .iter()
            .map(|seeds| Pubkey::create_program_address(seeds, &caller))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ProgramError::InvalidSeeds)?;

        invoke_context
            .prepare_next_cpi_instruction(instruction.clone(), &signers)
            .map_err(instruction_to_program_error)?;

        // Push the caller's view of the accounts into the runtime.
        let transaction_context = &invoke_context.transaction_context;
        let instruction_context = transaction_context
            .get_current_instruction_context()
            .map_err(instruction_to_program_error)?;
        let next = transaction_context
            .get_next_instruction_context()
            .map_err(instruction_to_program_error)?;
        let mut writable = Vec::new();
        for callee_account in next.instruction_accounts().iter() {
            let key = transaction_context
                .get_key_of_account_at_index(callee_account.index_in_transaction)
                .map_err(instruction_to_program_error)?;
            let info_index = account_infos
                .iter()
                .position(|info| info.key == key)
                .ok_or(ProgramError::NotEnoughAccountKeys)?;
            let info = &account_infos[info_index];
            let index_in_caller = instruction_context
                .get_index_of_account_in_instruction(callee_account.index_in_transaction)
                .map_err(instruction_to_program_error)?;
            let mut account = instruction_context
                .try_borrow_instruction_account(index_in_caller)
                .map_err(instruction_to_program_error)?;
            if account.get_lamports() != info.lamports() {
                account
                    .set_lamports(info.lamports())
                    .map_err(instruction_to_program_error)?;
            }
            let data = info.try_borrow_data()?;
            match account.can_data_be_resized(data.len()) {
                Ok(()) => account
                    .set_data_from_slice(&data)
                    .map_err(instruction_to_program_error)?,
                Err(err) if account.get_data() != *data => {
                    return Err(instruction_to_program_error(err));
                }
                Err(_) => {}
            }
            if account.get_owner() != info.owner {
                account
                    .set_owner(info.owner.as_ref())
                    .map_err(instruction_to_program_error)?;
            }
            if callee_account.is_writable() {
                writable.push((callee_account.index_in_transaction, info_index));
            }
        }

        let mut units = 0;
        invoke_context
            .process_instruction(&mut units, &mut ExecuteTimings::default())
            .map_err(instruction_to_program_error)?;

        // Pull the callee's changes back into the caller's account infos.
        let transaction_context = &invoke_context.transaction_context;
        let instruction_context = transaction_context
            .get_current_instruction_context()
            .map_err(instruction_to_program_error)?;
        for (index_in_transaction, info_index) in writable {
            let index_in_caller = instruction_context
                .get_index_of_account_in_instruction(index_in_transaction)
                .map_err(instruction_to_program_error)?;
            let account = instruction_context
                .try_borrow_instruction_account(index_in_caller)
                .map_err(instruction_to_program_error)?;
            let info = &account_infos[info_index];
            **info.try_borrow_mut_lamports()? = account.get_lamports();
            if info.owner != account.get_owner() {
                // SAFETY: mirrors what the SBF loader does when a callee
                // (the system program) reassigns an account's owner.
                #[allow(invalid_reference_casting)]
                unsafe {
                    let owner = info.owner as *const Pubkey as *mut Pubkey;
                    *owner = *account.get_owner();
                }
            }
            let new_data = account.get_data();
            if info.data_len() != new_data.len() {
                info.resize(new_data.len())?;
            }
            info.try_borrow_mut_data()?.clone_from_slice(new_data);
        }

        Ok(())
    }

    fn sol_get_clock_sysvar(&self, var_addr: *mut u8) -> u64 {
        write_sysvar(
            invoke_context()
                .environment_config
                .sysvar_cache()
                .get_clock(),
            var_addr,
        )
    }

    fn sol_get_epoch_schedule_sysvar(&self, var_addr: *mut u8) -> u64 {
        write_sysvar(
            invoke_context()
                .environment_config
                .sysvar_cache()
                .get_epoch_schedule(),
            var_addr,
        )
    }

    fn sol_get_rent_sysvar(&self, var_addr: *mut u8) -> u64 {
        write_sysvar(
            invoke_context()
                .environment_config
                .sysvar_cache()
                .get_rent(),
            var_addr,
        )
    }

    fn sol_get_return_data(&self) -> Option<(Pubkey, Vec<u8>)> {
        let (program_id, data) = invoke_context().transaction_context.get_return_data();
        Some((*program_id, data.to_vec()))
    }

    fn sol_set_return_data(&self, data: &[u8]) {
        let transaction_context = &mut invoke_context().transaction_context;
        let Ok(caller) = transaction_context
            .get_current_instruction_context()
            .and_then(|ctx| ctx.get_program_key().copied())
        else {
            return;
        };
        let _ = transaction_context.set_return_data(caller, data.to_vec());
    }

    fn sol_get_stack_height(&self) -> u64 {
        invoke_context().get_stack_height() as u64
    }
}

fn instruction_to_program_error(err: InstructionError) -> ProgramError {
    ProgramError::try_from(err).unwrap_or(ProgramError::InvalidArgument)
}
