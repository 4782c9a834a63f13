//! Parsing the program's events out of transaction logs.
//!
//! Any program may log `Program data:` lines, and anyone may send a
//! transaction that merely names a job's account, so a line is an MCJS event
//! only where the runtime's own frame lines (`Program <id> invoke [n]`,
//! `Program <id> success`) put it inside an invocation of the MCJS program
//! itself: not of a program it calls (the token program), nor of any other.
//! A program cannot write frame lines: whatever it logs begins
//! `Program log:` or `Program data:`.

use anchor_lang::prelude::Pubkey;
use anchor_lang::{AnchorDeserialize, Discriminator, Event};
use base64::Engine;

const DATA_PREFIX: &str = "Program data: ";
/// The runtime's last line when a transaction logs more than it keeps.
const TRUNCATED: &str = "Log truncated";

/// A line the runtime writes around each invocation.
#[derive(Debug, PartialEq, Eq)]
enum FrameLine {
    Invoke { program: Pubkey, depth: usize },
    Success(Pubkey),
    Failed(Pubkey),
}

fn frame_line(line: &str) -> Option<FrameLine> {
    let (id, tail) = line.strip_prefix("Program ")?.split_once(' ')?;
    // `Program log:`, `Program data:`, `Program return:` name no program.
    let program: Pubkey = id.parse().ok()?;
    if tail == "success" {
        return Some(FrameLine::Success(program));
    }
    if tail.starts_with("failed") {
        return Some(FrameLine::Failed(program));
    }
    let depth = tail
        .strip_prefix("invoke [")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    Some(FrameLine::Invoke { program, depth })
}

/// The decoded payloads of the `Program data:` lines that `program` logged
/// in its own invocation frames, in order. Nothing from a transaction that
/// failed (nothing in it happened), and nothing after the logs were
/// truncated or stopped nesting as the runtime nests them: what follows
/// cannot be placed in a frame.
pub fn data_lines_of(logs: &[String], program: &Pubkey) -> Vec<Vec<u8>> {
    let mut frames: Vec<Pubkey> = Vec::new();
    let mut found = Vec::new();
    for line in logs {
        if let Some(fields) = line.strip_prefix(DATA_PREFIX) {
            if frames.last() == Some(program)
                // A line may carry several space-separated fields; events use one.
                && let Some(data) = fields
                    .split(' ')
                    .next()
                    .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
            {
                found.push(data);
            }
            continue;
        }
        if line.starts_with(TRUNCATED) {
            break;
        }
        match frame_line(line) {
            Some(FrameLine::Invoke { program, depth }) if depth == frames.len() + 1 => {
                frames.push(program)
            }
            Some(FrameLine::Success(p)) if frames.last() == Some(&p) => {
                frames.pop();
            }
            Some(FrameLine::Failed(_)) => return Vec::new(),
            Some(_) => break,
            None => {}
        }
    }
    found
}

/// The payloads the MCJS program logged ([`data_lines_of`] for [`mcjs::ID`]).
pub fn data_lines(logs: &[String]) -> Vec<Vec<u8>> {
    data_lines_of(logs, &mcjs::ID)
}

/// Every event of type `E` the MCJS program logged, in order.
pub fn of_type<E: Event + AnchorDeserialize + Discriminator>(logs: &[String]) -> Vec<E> {
    data_lines(logs)
        .into_iter()
        .filter_map(|data| {
            let body = data.strip_prefix(E::DISCRIMINATOR)?;
            E::deserialize(&mut &body[..]).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::McjsEvent;
    use mcjs::events::CheckpointAttested;

    fn key(n: u8) -> Pubkey {
        Pubkey::new_from_array([n; 32])
    }

    fn token() -> Pubkey {
        anchor_spl::token::ID
    }

    /// A made-up program that logs whatever it likes.
    fn fake() -> Pubkey {
        key(66)
    }

    fn attested(step: u64) -> CheckpointAttested {
        CheckpointAttested {
            job: key(1),
            node: key(2),
            generation: 1,
            epoch: 0,
            step,
            checkpoint_hash: [step as u8; 32],
            chain: [0; 32],
            accrued: 0,
            by: key(3),
            at: 0,
        }
    }

    /// The `Program data:` line `emit!` writes for `event`.
    fn data(event: &CheckpointAttested) -> String {
        format!(
            "{DATA_PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(event.data())
        )
    }

    fn invoke(program: Pubkey, depth: usize) -> String {
        format!("Program {program} invoke [{depth}]")
    }

    fn success(program: Pubkey) -> String {
        format!("Program {program} success")
    }

    fn steps(logs: &[String]) -> Vec<u64> {
        of_type::<CheckpointAttested>(logs)
            .iter()
            .map(|e| e.step)
            .collect()
    }

    #[test]
    fn an_mcjs_frame_with_a_token_transfer_inside_yields_its_events() {
        let logs = vec![
            invoke(mcjs::ID, 1),
            "Program log: Instruction: AttestCheckpoint".into(),
            invoke(token(), 2),
            "Program log: Instruction: TransferChecked".into(),
            format!("Program {} consumed 6200 of 180000 compute units", token()),
            success(token()),
            data(&attested(10)),
            format!(
                "Program {} consumed 21000 of 200000 compute units",
                mcjs::ID
            ),
            success(mcjs::ID),
            invoke(mcjs::ID, 1),
            data(&attested(20)),
            success(mcjs::ID),
        ];
        assert_eq!(steps(&logs), [10, 20]);
        let all = McjsEvent::all_in_logs(&logs);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].name(), "CheckpointAttested");
    }

    #[test]
    fn another_programs_line_at_top_level_is_not_an_mcjs_event() {
        // The one-line program of the issue, in a transaction that also
        // calls MCJS honestly.
        let logs = vec![
            invoke(fake(), 1),
            data(&attested(99)),
            success(fake()),
            invoke(mcjs::ID, 1),
            data(&attested(10)),
            success(mcjs::ID),
            invoke(fake(), 1),
            data(&attested(98)),
            success(fake()),
        ];
        assert_eq!(steps(&logs), [10]);
        assert_eq!(McjsEvent::all_in_logs(&logs).len(), 1);
    }

    #[test]
    fn a_line_of_a_program_called_from_another_frame_is_not_an_mcjs_event() {
        // A program the fake one calls; and a program MCJS calls (the
        // token program here, or any other) does not speak for MCJS.
        let logs = vec![
            invoke(fake(), 1),
            invoke(key(67), 2),
            data(&attested(99)),
            success(key(67)),
            success(fake()),
            invoke(mcjs::ID, 1),
            invoke(token(), 2),
            data(&attested(98)),
            success(token()),
            data(&attested(10)),
            success(mcjs::ID),
        ];
        assert_eq!(steps(&logs), [10]);
    }

    #[test]
    fn a_line_in_no_frame_at_all_is_not_an_mcjs_event() {
        let logs = vec![
            data(&attested(99)),
            invoke(mcjs::ID, 1),
            success(mcjs::ID),
            data(&attested(98)),
        ];
        assert!(steps(&logs).is_empty());
    }

    #[test]
    fn mcjs_called_by_another_program_still_speaks_for_itself() {
        let logs = vec![
            invoke(fake(), 1),
            data(&attested(99)),
            invoke(mcjs::ID, 2),
            data(&attested(10)),
            success(mcjs::ID),
            data(&attested(98)),
            success(fake()),
        ];
        assert_eq!(steps(&logs), [10]);
    }

    #[test]
    fn frame_lines_a_program_logs_itself_are_only_log_lines() {
        let logs = vec![
            invoke(fake(), 1),
            format!("Program log: {}", success(fake())),
            format!("Program log: {}", invoke(mcjs::ID, 2)),
            format!("Program log: x\n{}", invoke(mcjs::ID, 2)),
            data(&attested(99)),
            success(fake()),
        ];
        assert!(steps(&logs).is_empty());
    }

    #[test]
    fn nothing_after_truncated_logs_is_trusted() {
        let logs = vec![
            invoke(mcjs::ID, 1),
            data(&attested(10)),
            TRUNCATED.into(),
            data(&attested(20)),
            success(mcjs::ID),
            invoke(mcjs::ID, 1),
            data(&attested(30)),
            success(mcjs::ID),
        ];
        assert_eq!(steps(&logs), [10]);
        // Truncated inside another program's frame: MCJS frames after it
        // cannot be told from lines of that program.
        let logs = vec![
            invoke(fake(), 1),
            TRUNCATED.into(),
            invoke(mcjs::ID, 1),
            data(&attested(99)),
        ];
        assert!(steps(&logs).is_empty());
    }

    #[test]
    fn frames_that_do_not_nest_stop_the_reading() {
        let logs = vec![
            invoke(fake(), 1),
            // Claims to enter MCJS at the wrong depth, then to leave the
            // fake program from inside it.
            invoke(mcjs::ID, 1),
            data(&attested(99)),
            success(mcjs::ID),
            invoke(mcjs::ID, 1),
            data(&attested(98)),
            success(mcjs::ID),
        ];
        assert!(steps(&logs).is_empty());
        let logs = vec![
            invoke(mcjs::ID, 1),
            invoke(fake(), 2),
            success(mcjs::ID),
            data(&attested(99)),
        ];
        assert!(steps(&logs).is_empty());
    }

    #[test]
    fn a_failed_transaction_logged_no_events() {
        let logs = vec![
            invoke(mcjs::ID, 1),
            data(&attested(10)),
            success(mcjs::ID),
            invoke(mcjs::ID, 1),
            format!("Program {} failed: custom program error: 0x1771", mcjs::ID),
        ];
        assert!(steps(&logs).is_empty());
    }

    #[test]
    fn frame_lines_parse_as_the_runtime_writes_them() {
        assert_eq!(
            frame_line(&invoke(mcjs::ID, 3)),
            Some(FrameLine::Invoke {
                program: mcjs::ID,
                depth: 3
            })
        );
        assert_eq!(
            frame_line(&success(token())),
            Some(FrameLine::Success(token()))
        );
        assert_eq!(
            frame_line(&format!("Program {} failed: insufficient funds", token())),
            Some(FrameLine::Failed(token()))
        );
        for other in [
            "Program log: Instruction: AttestCheckpoint".to_string(),
            format!("Program return: {} AQ==", mcjs::ID),
            format!("Program {} consumed 10 of 20 compute units", mcjs::ID),
            format!("Program {} invoke [x]", mcjs::ID),
            "Program is not deployed".into(),
        ] {
            assert_eq!(frame_line(&other), None, "{other}");
        }
    }
}
