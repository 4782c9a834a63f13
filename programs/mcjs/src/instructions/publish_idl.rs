//! The program's Anchor IDL, written on chain where the ecosystem's tools
//! look for it: Anchor's IDL account, at
//! `create_with_seed(PDA of no seeds, "anchor:idl", program)`, laid out as
//! Anchor lays it out (discriminator, authority, `u32` length, the
//! zlib-compressed IDL JSON). anchorpy's `Program.fetch_idl`, Anchor's
//! `legacy-idl fetch` and explorers read it from there.
//!
//! Anchor's own IDL instructions are not in this program: their `Create`
//! makes whoever sends it first the IDL's authority, so a stranger could
//! publish a lying IDL for MCJS between its deployment and its admin's first
//! write. Here only the program's upgrade authority writes it (the Config's
//! admin for the native build, which has none), checked on every write.
//!
//! The IDL is written in chunks (a transaction holds about 1 KB of it):
//! each `publish_idl` writes `data` at `offset` of an IDL `total_len` bytes
//! long, growing the account (at most 10 KiB an instruction, the runtime's
//! limit) and paying its rent from the publisher. A write at offset 0 marks
//! the account's IDL absent (length 0) until the write that ends at
//! `total_len`: a reader sees the old IDL, none, or the new one, never a mix.

use anchor_lang::prelude::*;
use anchor_lang::solana_program::entrypoint::MAX_PERMITTED_DATA_INCREASE;
use anchor_lang::solana_program::{program::invoke_signed, system_instruction};
use anchor_lang::system_program;

use crate::errors::McjsError;
use crate::instructions::initialize::require_upgrade_authority;
use crate::state::{seeds::*, Config};

/// The seed of the IDL account's address (with the PDA of no seeds as base).
pub const IDL_SEED: &str = "anchor:idl";
/// Anchor's IDL account discriminator: sha256("internal:IdlAccount")[..8].
pub const IDL_DISCRIMINATOR: [u8; 8] = [0x18, 0x46, 0x62, 0xbf, 0x3a, 0x90, 0x7b, 0x9e];
/// Discriminator, authority, compressed length.
pub const IDL_HEADER: usize = 8 + 32 + 4;
/// The largest compressed IDL this program keeps (the program's own is about 20 KB).
pub const MAX_IDL_LEN: u32 = 256 * 1024;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct PublishIdlArgs {
    /// Where `data` goes in the compressed IDL.
    pub offset: u32,
    /// The compressed IDL's whole length.
    pub total_len: u32,
    pub data: Vec<u8>,
}

#[derive(Accounts)]
pub struct PublishIdl<'info> {
    /// The program's upgrade authority (the Config's admin where the program
    /// has none); pays the IDL account's rent.
    #[account(mut)]
    pub authority: Signer<'info>,
    #[account(seeds = [SEED_PREFIX, SEED_CONFIG], bump = config.bump)]
    pub config: Account<'info, Config>,
    /// CHECK: the address is Anchor's IDL address of this program (checked in
    /// `validate`); created, grown and written only here.
    #[account(mut)]
    pub idl: UncheckedAccount<'info>,
    /// CHECK: the PDA of no seeds, the base of the IDL account's address; it
    /// signs the account's creation.
    #[account(seeds = [], bump)]
    pub base: UncheckedAccount<'info>,
    /// CHECK: this program's own account (its address is checked).
    #[account(address = crate::ID)]
    pub program: UncheckedAccount<'info>,
    /// CHECK: the programdata account derived from the program id, checked
    /// with the upgrade authority.
    pub program_data: UncheckedAccount<'info>,
    pub system_program: Program<'info, System>,
}

impl PublishIdl<'_> {
    fn validate(&self, args: &PublishIdlArgs) -> Result<()> {
        let upgradeable = require_upgrade_authority(
            &self.program,
            &self.program_data,
            &self.authority.key(),
            McjsError::NotIdlPublisher,
        )?;
        if !upgradeable {
            require_keys_eq!(
                self.authority.key(),
                self.config.admin,
                McjsError::NotIdlPublisher
            );
        }
        let expected = Pubkey::create_with_seed(&self.base.key(), IDL_SEED, &crate::ID)
            .map_err(|_| error!(McjsError::IdlWriteOutOfRange))?;
        require_keys_eq!(self.idl.key(), expected, McjsError::IdlWriteOutOfRange);
        let end = args
            .offset
            .checked_add(
                u32::try_from(args.data.len())
                    .map_err(|_| error!(McjsError::IdlWriteOutOfRange))?,
            )
            .ok_or(error!(McjsError::IdlWriteOutOfRange))?;
        require!(
            args.total_len > 0 && args.total_len <= MAX_IDL_LEN && end <= args.total_len,
            McjsError::IdlWriteOutOfRange
        );
        Ok(())
    }

    #[access_control(ctx.accounts.validate(&args))]
    pub fn publish_idl(ctx: Context<Self>, args: PublishIdlArgs) -> Result<()> {
        let accounts = &ctx.accounts;
        let idl = accounts.idl.to_account_info();
        let target = IDL_HEADER + args.total_len as usize;
        let created = *idl.owner != crate::ID;
        if created {
            accounts.create(ctx.bumps.base, target.min(MAX_PERMITTED_DATA_INCREASE))?;
        } else {
            let data = idl.try_borrow_data()?;
            require!(
                data.len() >= IDL_HEADER && data[..8] == IDL_DISCRIMINATOR,
                McjsError::IdlWriteOutOfRange
            );
        }
        // Grow towards the IDL's length (10 KiB an instruction at most, the
        // creation included), or shrink to it when a new IDL starts shorter
        // than the old one.
        let len = idl.data_len();
        let new_len = if created {
            len
        } else if len < target {
            target.min(len + MAX_PERMITTED_DATA_INCREASE)
        } else if args.offset == 0 {
            target
        } else {
            len
        };
        if new_len != len {
            idl.resize(new_len)?;
        }
        accounts.settle_rent(new_len)?;
        let end = args.offset as usize + args.data.len();
        require!(
            IDL_HEADER + end <= idl.data_len(),
            McjsError::IdlWriteOutOfRange
        );
        let mut data = idl.try_borrow_mut_data()?;
        data[..8].copy_from_slice(&IDL_DISCRIMINATOR);
        data[8..40].copy_from_slice(accounts.authority.key().as_ref());
        if args.offset == 0 {
            data[40..44].copy_from_slice(&0u32.to_le_bytes());
        }
        let at = IDL_HEADER + args.offset as usize;
        data[at..at + args.data.len()].copy_from_slice(&args.data);
        if end == args.total_len as usize && data.len() == target {
            data[40..44].copy_from_slice(&args.total_len.to_le_bytes());
        }
        Ok(())
    }

    /// Makes the IDL account this program's, `space` bytes long, signed
    /// for by the base PDA: allocated and assigned in place rather than
    /// created, so that lamports anyone sent to the address first (which
    /// would make `create_account_with_seed` fail) do not block it; its rent
    /// is settled after ([`Self::settle_rent`]).
    fn create(&self, bump: u8, space: usize) -> Result<()> {
        let (idl, base) = (self.idl.to_account_info(), self.base.to_account_info());
        let signer: &[&[u8]] = &[&[bump]];
        let infos = [
            idl.clone(),
            base.clone(),
            self.system_program.to_account_info(),
        ];
        let ix = system_instruction::allocate_with_seed(
            idl.key,
            base.key,
            IDL_SEED,
            space as u64,
            &crate::ID,
        );
        invoke_signed(&ix, &infos, &[signer])?;
        let ix = system_instruction::assign_with_seed(idl.key, base.key, IDL_SEED, &crate::ID);
        Ok(invoke_signed(&ix, &infos, &[signer])?)
    }

    /// Tops the account up to rent exemption at `len` from the publisher, or
    /// returns what a shorter IDL no longer needs.
    fn settle_rent(&self, len: usize) -> Result<()> {
        let idl = self.idl.to_account_info();
        let needed = Rent::get()?.minimum_balance(len);
        let have = idl.lamports();
        if have < needed {
            system_program::transfer(
                CpiContext::new(
                    self.system_program.key(),
                    system_program::Transfer {
                        from: self.authority.to_account_info(),
                        to: idl,
                    },
                ),
                needed - have,
            )?;
        } else if have > needed {
            let excess = have - needed;
            idl.sub_lamports(excess)?;
            self.authority.to_account_info().add_lamports(excess)?;
        }
        Ok(())
    }
}
