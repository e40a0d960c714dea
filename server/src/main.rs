//! The `berth` binary: parses the command line and hands over to the library.

use clap::Parser;
use server::cli::{Cli, Command};

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| server::cli::usage_error(e));
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if matches!(cli.command, Command::Serve(_)) {
        server::slices::prefer_calling_thread();
        runtime.on_thread_start(server::slices::prefer_calling_thread);
    }
    let runtime = runtime.build().unwrap_or_else(|e| {
        eprintln!("error: cannot start the async runtime: {e}");
        std::process::exit(1)
    });
    let code = runtime.block_on(run(cli));
    std::process::exit(code);
}

async fn run(cli: Cli) -> i32 {
    match &cli.command {
        Command::Serve(args) => {
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into()))
                .init();
            match server::serve::serve(args).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    1
                }
            }
        }
        _ => {
            // Like other command-line tools, end quietly when the reader of our output goes
            // away (`berth jobs get ID | head`) instead of failing to print.
            // SAFETY: resetting a signal's disposition before any thread writes output.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
            match cli.run_client_command().await {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    1
                }
            }
        }
    }
}
