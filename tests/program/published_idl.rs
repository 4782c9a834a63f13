//! The program's IDL on chain (`publish_idl`): written into Anchor's IDL
//! account by the upgrade authority only, whole or not at all as readers
//! see it, and not blocked by lamports sent to its address first.

use anchor_lang::solana_program::rent::Rent;
use anchor_lang::solana_program::system_instruction;
use mcjs::errors::McjsError;
use mcjs::instructions::{IDL_DISCRIMINATOR, IDL_HEADER, MAX_IDL_LEN};
use mcjs_client::{Pubkey, ix};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// About what a transaction holds of the IDL besides its accounts.
const CHUNK: usize = 800;

/// Bytes that do not repeat (a compressed IDL does not either).
fn idl_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

fn publish(env: &mut Env, signer: &Keypair, bytes: &[u8]) -> Outcome {
    let total = bytes.len() as u32;
    let mut logs = Vec::new();
    for (i, chunk) in bytes.chunks(CHUNK).enumerate() {
        let ix = ix::publish_idl(&signer.pubkey(), (i * CHUNK) as u32, total, chunk.to_vec());
        logs.extend(env.send(&[ix], &[signer])?);
    }
    Ok(logs)
}

/// (authority, the IDL bytes its length field covers), or None when there is no account.
fn published(env: &Env) -> Option<(Pubkey, Vec<u8>)> {
    let account = env.account(&ix::idl_address())?;
    assert_eq!(account.owner, mcjs::ID, "the IDL account is the program's");
    let data = &account.data;
    assert_eq!(
        data[..8],
        IDL_DISCRIMINATOR,
        "Anchor's IdlAccount discriminator"
    );
    let authority = Pubkey::try_from(&data[8..40]).unwrap();
    let len = u32::from_le_bytes(data[40..44].try_into().unwrap()) as usize;
    Some((authority, data[IDL_HEADER..IDL_HEADER + len].to_vec()))
}

/// Anchor's address, its layout, every byte: what anchorpy's `fetch_idl`
/// reads. The account grows past the runtime's 10 KiB an instruction over
/// the writes, and is exactly as large as the IDL, rent paid by the publisher.
#[test]
fn the_upgrade_authority_publishes_the_idl_where_anchor_tools_read_it() {
    let mut env = Env::new();
    let admin = env.admin.insecure_clone();
    let base = Pubkey::find_program_address(&[], &mcjs::ID).0;
    assert_eq!(
        ix::idl_address(),
        Pubkey::create_with_seed(&base, "anchor:idl", &mcjs::ID).unwrap()
    );
    let bytes = idl_bytes(25_000, 1);
    publish(&mut env, &admin, &bytes).unwrap();
    assert_eq!(published(&env), Some((admin.pubkey(), bytes.clone())));
    let account = env.account(&ix::idl_address()).unwrap();
    assert_eq!(account.data.len(), IDL_HEADER + bytes.len());
    assert_eq!(
        account.lamports,
        Rent::default().minimum_balance(account.data.len()),
        "rent-exempt at its size, no more"
    );
}

/// A stranger cannot publish (before or after the authority) and cannot
/// block publishing by funding the address first; its refused writes
/// change nothing.
#[test]
fn a_stranger_neither_publishes_nor_blocks_nor_overwrites_the_idl() {
    let mut env = Env::new();
    let admin = env.admin.insecure_clone();
    let stranger = Keypair::new();
    env.svm.airdrop(&stranger.pubkey(), 10_000_000_000).unwrap();
    let gift = 50_000_000;
    let fund = system_instruction::transfer(&stranger.pubkey(), &ix::idl_address(), gift);
    env.send(&[fund], &[&stranger]).unwrap();

    let lie = idl_bytes(2_000, 9);
    let first = ix::publish_idl(
        &stranger.pubkey(),
        0,
        lie.len() as u32,
        lie[..CHUNK].to_vec(),
    );
    expect_error(env.send(&[first], &[&stranger]), McjsError::NotIdlPublisher);
    let untouched = env.account(&ix::idl_address()).unwrap();
    assert_eq!(
        untouched.owner,
        anchor_lang::solana_program::system_program::ID
    );
    assert!(untouched.data.is_empty());

    let bytes = idl_bytes(3_000, 2);
    let admin_before = env.svm.get_balance(&admin.pubkey()).unwrap();
    publish(&mut env, &admin, &bytes).unwrap();
    assert_eq!(published(&env), Some((admin.pubkey(), bytes.clone())));
    let account = env.account(&ix::idl_address()).unwrap();
    let rent = Rent::default().minimum_balance(account.data.len());
    assert_eq!(account.lamports, rent, "rent-exempt, no more");
    let fees = 5_000 * bytes.len().div_ceil(CHUNK) as u64;
    assert_eq!(
        env.svm.get_balance(&admin.pubkey()).unwrap(),
        admin_before + (gift - rent) - fees,
        "what was sent to the address beyond the rent went to the publisher"
    );

    let overwrite = ix::publish_idl(
        &stranger.pubkey(),
        0,
        lie.len() as u32,
        lie[..CHUNK].to_vec(),
    );
    expect_error(
        env.send(&[overwrite], &[&stranger]),
        McjsError::NotIdlPublisher,
    );
    assert_eq!(published(&env), Some((admin.pubkey(), bytes)));
}

/// A write past its IDL's length, an IDL over the cap, or an account that
/// is not Anchor's IDL address is refused; a new IDL reads as absent from
/// its first write to its last, never as a mix of the two, and a shorter
/// one shrinks the account and returns its rent.
#[test]
fn writes_stay_inside_the_idl_and_a_new_idl_replaces_the_old_whole() {
    let mut env = Env::new();
    let admin = env.admin.insecure_clone();
    let key = admin.pubkey();
    let past_end = ix::publish_idl(&key, 100, 120, vec![1; 21]);
    expect_error(
        env.send(&[past_end], &[&admin]),
        McjsError::IdlWriteOutOfRange,
    );
    let too_big = ix::publish_idl(&key, 0, MAX_IDL_LEN + 1, vec![1; 10]);
    expect_error(
        env.send(&[too_big], &[&admin]),
        McjsError::IdlWriteOutOfRange,
    );
    let mut elsewhere = ix::publish_idl(&key, 0, 10, vec![1; 10]);
    elsewhere.accounts[2].pubkey = Pubkey::new_unique();
    expect_error(
        env.send(&[elsewhere], &[&admin]),
        McjsError::IdlWriteOutOfRange,
    );
    assert!(env.account(&ix::idl_address()).is_none());

    let old = idl_bytes(12_000, 3);
    publish(&mut env, &admin, &old).unwrap();
    let new = idl_bytes(2_500, 4);
    let first = ix::publish_idl(&key, 0, new.len() as u32, new[..CHUNK].to_vec());
    env.send(&[first], &[&admin]).unwrap();
    assert_eq!(
        published(&env),
        Some((key, Vec::new())),
        "absent while the new IDL is written"
    );
    publish(&mut env, &admin, &new).unwrap();
    assert_eq!(published(&env), Some((key, new.clone())));
    let account = env.account(&ix::idl_address()).unwrap();
    assert_eq!(account.data.len(), IDL_HEADER + new.len());
    assert_eq!(
        account.lamports,
        Rent::default().minimum_balance(account.data.len())
    );
}
