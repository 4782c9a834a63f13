//! The program's setup on a fresh chain, through ordinary transactions: a
//! test USDC mint and a treasury, a USDC account per wallet (funded for the
//! user and the providers), and the program's Config.

use anchor_lang::solana_program::system_instruction;
use anchor_spl::token::spl_token;
use mcjs::instructions::InitializeArgs;
use mcjs::state::ConfigParams;
use mcjs_client::{ChainClient, ChainError, Keypair, Pubkey, Signer, ix};

use crate::{MINT_LEN, PROVIDER_USDC, TOKEN_ACCOUNT_LEN, USDC_DECIMALS, USER_USDC};

#[allow(clippy::too_many_arguments)]
pub(crate) async fn initialise(
    client: &ChainClient,
    admin: &Keypair,
    scheduler: &Keypair,
    mint: &Keypair,
    treasury: &Keypair,
    users: &[&Keypair],
    providers: &[&Keypair],
    params: ConfigParams,
) -> Result<(), ChainError> {
    let mint_rent = client
        .rpc()
        .get_minimum_balance_for_rent_exemption(MINT_LEN)
        .await
        .map_err(|e| ChainError::Rpc(e.to_string()))?;
    let account_rent = client
        .rpc()
        .get_minimum_balance_for_rent_exemption(TOKEN_ACCOUNT_LEN)
        .await
        .map_err(|e| ChainError::Rpc(e.to_string()))?;
    let admin_key = admin.pubkey();
    let mint_key = mint.pubkey();

    client
        .send(
            &[
                system_instruction::create_account(
                    &admin_key,
                    &mint_key,
                    mint_rent,
                    MINT_LEN as u64,
                    &spl_token::ID,
                ),
                spl_token::instruction::initialize_mint2(
                    &spl_token::ID,
                    &mint_key,
                    &admin_key,
                    None,
                    USDC_DECIMALS,
                )
                .expect("valid mint instruction"),
                system_instruction::create_account(
                    &admin_key,
                    &treasury.pubkey(),
                    account_rent,
                    TOKEN_ACCOUNT_LEN as u64,
                    &spl_token::ID,
                ),
                spl_token::instruction::initialize_account3(
                    &spl_token::ID,
                    &treasury.pubkey(),
                    &mint_key,
                    &admin_key,
                )
                .expect("valid account instruction"),
            ],
            &[admin, mint, treasury],
        )
        .await?;

    let mut funded: Vec<(Pubkey, u64)> = Vec::new();
    funded.extend(users.iter().map(|k| (k.pubkey(), USER_USDC)));
    funded.extend(providers.iter().map(|k| (k.pubkey(), PROVIDER_USDC)));
    funded.push((admin_key, 0));
    funded.push((scheduler.pubkey(), 0));
    let mut ixs = Vec::new();
    for (owner, amount) in &funded {
        ixs.push(ix::create_usdc_account(&admin_key, owner, &mint_key));
        if *amount > 0 {
            ixs.push(
                spl_token::instruction::mint_to(
                    &spl_token::ID,
                    &mint_key,
                    &ix::usdc_account(owner, &mint_key),
                    &admin_key,
                    &[],
                    *amount,
                )
                .expect("valid mint_to"),
            );
        }
    }
    // Small batches keep each transaction under the packet size; they are
    // sent together and confirmed in the same slot.
    let signers = [admin];
    let sends = ixs.chunks(4).map(|chunk| client.send(chunk, &signers));
    for outcome in futures_util::future::join_all(sends).await {
        outcome?;
    }

    client
        .send(
            &[ix::initialize(
                &admin_key,
                &mint_key,
                &treasury.pubkey(),
                InitializeArgs {
                    scheduler: scheduler.pubkey(),
                    params,
                },
            )],
            &[admin],
        )
        .await?;
    Ok(())
}
