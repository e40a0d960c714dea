//! `berth tokens …`, `berth audit`, `berth whoami`: who may do what, over HTTP.

use anyhow::{bail, Result};
use app::auth::{AuditPage, CreatedToken, NewToken, Role, TokenInfo, Whoami};

use crate::cli::{AuditArgs, Cli, Output, TokensCommand};
use crate::cli::jobs::{finish, show};
use crate::cli::client::encode;

/// `berth tokens create|list|revoke`.
pub async fn run_tokens(cli: &Cli, command: &TokensCommand) -> Result<i32> {
    let client = cli.client();
    let outcome = match command {
        TokensCommand::Create { user, role, label, output } => {
            let Some(role) = Role::parse(role) else {
                bail!("--role: `{role}` is not a role (viewer, submitter, editor or admin)");
            };
            let new = NewToken { user: user.clone(), role, label: label.clone() };
            client.post_json::<CreatedToken>("/api/v1/tokens", &new).await.map(|created| {
                show(*output, &created, |c| {
                    println!("{}", c.secret);
                    eprintln!("token {} for {} ({}): the secret above is shown only now", c.token.id, c.token.user, c.token.role);
                })
            })
        }
        TokensCommand::List { output } => client.get_json::<Vec<TokenInfo>>("/api/v1/tokens", &[]).await.map(|tokens| {
            show(*output, &tokens, |tokens| {
                println!("{:<16}  {:<16}  {:<9}  {:<20}  {:<20}  LABEL", "ID", "USER", "ROLE", "CREATED", "STATUS");
                for t in tokens {
                    let status = match &t.revoked_at {
                        Some(at) => format!("revoked {}", at.format("%Y-%m-%d %H:%M")),
                        None => "active".into(),
                    };
                    let created = t.created_at.format("%Y-%m-%d %H:%M:%S").to_string();
                    println!("{:<16}  {:<16}  {:<9}  {created:<20}  {status:<20}  {}", t.id, t.user, t.role, t.label.as_deref().unwrap_or(""));
                }
            })
        }),
        TokensCommand::Revoke { id, output } => {
            let path = format!("/api/v1/tokens/{}/revoke", encode(id));
            client.post_json::<TokenInfo>(&path, &serde_json::json!({})).await.map(|t| {
                show(*output, &t, |t| println!("revoked {} ({}, {})", t.id, t.user, t.role))
            })
        }
    };
    Ok(finish(outcome))
}

/// `berth audit`.
pub async fn run_audit(cli: &Cli, args: &AuditArgs) -> Result<i32> {
    let mut q: Vec<(&str, String)> = vec![("max_items", args.max_items.to_string())];
    for (k, v) in [("action", &args.action), ("actor", &args.actor), ("cursor", &args.cursor)] {
        if let Some(v) = v {
            q.push((k, v.clone()));
        }
    }
    let outcome = cli.client().get_json::<AuditPage>("/api/v1/audit", &q).await.map(|page| {
        show(args.output, &page, |page| {
            for e in &page.entries {
                println!("{}  {:<16} {:<16} {:<20} {}", e.at.format("%Y-%m-%d %H:%M:%S"), e.actor, e.action, e.target, e.detail);
            }
            if let Some(c) = &page.next_cursor {
                println!("more: --cursor {c}");
            }
        })
    });
    Ok(finish(outcome))
}

/// `berth whoami`.
pub async fn run_whoami(cli: &Cli, output: Output) -> Result<i32> {
    let outcome = cli.client().get_json::<Whoami>("/api/v1/whoami", &[]).await.map(|me| {
        show(output, &me, |me| println!("{} ({}, via {})", me.user, me.role, me.via.as_str()))
    });
    Ok(finish(outcome))
}
