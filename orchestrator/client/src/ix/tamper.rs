//! Changes to a built instruction that no honest client makes: the program's
//! tests use them to send what an attacker would (another account in a
//! slot, a missing signature).

use anchor_lang::prelude::{AccountMeta, Pubkey};
use anchor_lang::solana_program::instruction::Instruction;

/// Replaces every occurrence of `from` among an instruction's accounts.
/// Returns how many were replaced.
pub fn substitute_account(ix: &mut Instruction, from: &Pubkey, to: &Pubkey) -> usize {
    let mut replaced = 0;
    for meta in ix.accounts.iter_mut().filter(|m| m.pubkey == *from) {
        meta.pubkey = *to;
        replaced += 1;
    }
    replaced
}

/// Clears the signer flag of an account, as a transaction without its signature would.
pub fn unsign(ix: &mut Instruction, key: &Pubkey) {
    for meta in ix.accounts.iter_mut().filter(|m| m.pubkey == *key) {
        *meta = if meta.is_writable {
            AccountMeta::new(meta.pubkey, false)
        } else {
            AccountMeta::new_readonly(meta.pubkey, false)
        };
    }
}
