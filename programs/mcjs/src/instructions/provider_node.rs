//! A node with its provider, as `update_node` and `set_node_status` name
//! them (the signer, the provider's wallet or the node's operator key, is
//! checked by each).

use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::{Node, Provider};

/// No seeds are checked (state/seeds.rs, "Where a program account's seeds
/// are not checked again"): the node names its provider (`has_one`).
#[derive(Accounts)]
pub struct ProvidersNode<'info> {
    pub provider: Account<'info, Provider>,
    #[account(mut, has_one = provider @ McjsError::WrongProvider)]
    pub node: Account<'info, Node>,
}
