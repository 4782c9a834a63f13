use anchor_lang::prelude::*;
declare_id!("McjsJob1111111111111111111111111111111111111");
#[program]
pub mod mcjs {
    use super::*;
    pub fn noop(_ctx: Context<Noop>) -> Result<()> { Ok(()) }
}
#[derive(Accounts)]
pub struct Noop {}
