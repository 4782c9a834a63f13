use anchor_lang::prelude::*;
use anchor_lang::system_program;

use crate::errors::McjsError;
use crate::state::{seeds::*, CheckerPool, Config, Node, NodeStatus, PoolMember, Provider};

/// No seeds are checked on the Config, node or provider (state/seeds.rs,
/// "Where a program account's seeds are not checked again"): the node names
/// its provider and its operator signs. The pool is at the PDA of the node's
/// GPU model (checked), created by the first node to enter it and grown by
/// each new member; it is read and written here by hand, for Anchor's
/// `init_if_needed` takes only an account of the size it was created with.
#[derive(Accounts)]
pub struct EnterCheckerPool<'info> {
    /// The node's operator key (its agent); pays the pool's growth.
    #[account(mut)]
    pub operator: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    #[account(
        has_one = provider @ McjsError::WrongProvider,
        constraint = node.is_operator(&operator.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    pub provider: Box<Account<'info, Provider>>,
    /// CHECK: the checker pool of the node's GPU model, at its PDA (seeds
    /// checked): empty until the first node enters, then this program's
    /// `CheckerPool` (owner and discriminator checked when read).
    #[account(
        mut,
        seeds = [SEED_PREFIX, SEED_CHECKER_POOL, node.hardware.gpu_model.as_bytes()],
        bump,
    )]
    pub pool: UncheckedAccount<'info>,
    pub system_program: Program<'info, System>,
}

impl EnterCheckerPool<'_> {
    fn validate(&self) -> Result<()> {
        require!(
            self.node.status != NodeStatus::Offline,
            McjsError::InvalidChecker
        );
        self.provider
            .require_min_stake(self.config.params.min_provider_stake)?;
        require!(
            self.provider.committed_stake() > 0,
            McjsError::StakeBelowMinimum
        );
        Ok(())
    }

    /// A node's agent enters it in the checker pool of its GPU model, or
    /// renews its entry (state/checker_pool.rs): one node per provider,
    /// weighted by the stake its provider commits now, standing for
    /// `POOL_MEMBERSHIP_SECS`. The first node of a model creates the pool;
    /// each new member pays for its own place.
    #[access_control(ctx.accounts.validate())]
    pub fn enter_checker_pool(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let accounts = ctx.accounts;
        let info = accounts.pool.to_account_info();
        let model = accounts.node.hardware.gpu_model.clone();
        let mut pool = if info.owner == &crate::ID {
            CheckerPool::try_deserialize(&mut &info.try_borrow_data()?[..])?
        } else {
            CheckerPool {
                gpu_model: model,
                bump: ctx.bumps.pool,
                members: Vec::new(),
            }
        };
        pool.enter(
            PoolMember {
                provider: accounts.provider.key(),
                node: accounts.node.key(),
                weight: accounts.provider.committed_stake(),
                renewed_at: now,
            },
            now,
        )?;
        let needed = CheckerPool::space(pool.members.len());
        if info.owner == &crate::ID {
            // The account grows by a member's place as the pool does.
            if info.data_len() < needed {
                top_up_rent(accounts, &info, needed)?;
                info.resize(needed)?;
            }
        } else {
            create(accounts, &info, needed, &pool)?;
        }
        let mut data = info.try_borrow_mut_data()?;
        pool.try_serialize(&mut &mut data[..])?;
        Ok(())
    }
}

/// What `account` lacks of the rent of `len` bytes, from the operator.
fn top_up_rent<'info>(
    accounts: &EnterCheckerPool<'info>,
    account: &AccountInfo<'info>,
    len: usize,
) -> Result<()> {
    let lacking = Rent::get()?
        .minimum_balance(len)
        .saturating_sub(account.lamports());
    if lacking > 0 {
        system_program::transfer(
            CpiContext::new(
                accounts.system_program.key(),
                system_program::Transfer {
                    from: accounts.operator.to_account_info(),
                    to: account.clone(),
                },
            ),
            lacking,
        )?;
    }
    Ok(())
}

/// Creates the pool's account at its PDA, owned by this program. As
/// Anchor's `init` does, an address someone has already sent lamports to is
/// topped up, allocated and assigned instead: dust sent there beforehand
/// blocks nothing.
fn create<'info>(
    accounts: &EnterCheckerPool<'info>,
    account: &AccountInfo<'info>,
    len: usize,
    pool: &CheckerPool,
) -> Result<()> {
    let bump = [pool.bump];
    let seeds: &[&[u8]] = &[
        SEED_PREFIX,
        SEED_CHECKER_POOL,
        pool.gpu_model.as_bytes(),
        &bump,
    ];
    let signer = &[seeds];
    let system = accounts.system_program.key();
    if account.lamports() == 0 {
        system_program::create_account(
            CpiContext::new_with_signer(
                system,
                system_program::CreateAccount {
                    from: accounts.operator.to_account_info(),
                    to: account.clone(),
                },
                signer,
            ),
            Rent::get()?.minimum_balance(len),
            len as u64,
            &crate::ID,
        )
    } else {
        top_up_rent(accounts, account, len)?;
        system_program::allocate(
            CpiContext::new_with_signer(
                system,
                system_program::Allocate {
                    account_to_allocate: account.clone(),
                },
                signer,
            ),
            len as u64,
        )?;
        system_program::assign(
            CpiContext::new_with_signer(
                system,
                system_program::Assign {
                    account_to_assign: account.clone(),
                },
                signer,
            ),
            &crate::ID,
        )
    }
}
