//! One module per subcommand.

pub mod admin;
pub mod agent;
pub mod audit;
pub mod dashboard;
#[cfg(feature = "demo")]
pub mod demo;
pub mod deploy;
pub mod hal;
pub mod job;
pub mod job_output;
#[cfg(feature = "localnet")]
pub mod localnet;
pub mod node;
pub mod provider;
pub mod scheduler;
pub mod spec;

/// The arguments of a command this `mcjs` was built without: taken as they
/// come, so that the error says how to get the command, not that an
/// argument is unknown.
#[cfg(not(all(feature = "demo", feature = "localnet")))]
#[derive(clap::Args, Debug)]
pub struct Unbuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

/// The error for `mcjs <command>` where this build lacks the command's
/// feature (`demo`, `localnet`). Compiled in every build, so that the test
/// build (which has both) tests what a plain build says.
#[cfg_attr(all(feature = "demo", feature = "localnet"), allow(dead_code))]
pub fn unbuilt(command: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "this mcjs was built without `mcjs {command}` (it links a local chain{}); build it with \
         `cargo build -p mcjs-cli --features {command}`{}",
        if command == "demo" {
            " and the cluster harness"
        } else {
            ""
        },
        if command == "demo" {
            ", or run `bash scripts/demo.sh`"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    /// What a plain `mcjs` (built without `demo` and `localnet`) answers
    /// `mcjs demo` and `mcjs localnet` with: how to get them.
    #[test]
    fn a_command_this_build_lacks_says_how_to_get_it() {
        let demo = super::unbuilt("demo").to_string();
        assert!(
            demo.contains("cargo build -p mcjs-cli --features demo"),
            "{demo}"
        );
        assert!(demo.contains("bash scripts/demo.sh"), "{demo}");
        let localnet = super::unbuilt("localnet").to_string();
        assert!(localnet.contains("--features localnet"), "{localnet}");
        assert!(!localnet.contains("demo"), "{localnet}");
    }
}
