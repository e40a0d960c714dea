//! The `berth` binary on its own: copied alone into an empty directory and started there
//! with no build tree and no `BERTH_SITE_ROOT`, it serves the dashboard's files from
//! inside itself (content-hashed names cached as immutable, brotli or gzip when asked,
//! revalidated by ETag), creates its SQLite database under the working directory, and says
//! its version and commit.

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::berth::berth_bin;
use common::wait_until;

/// A `berth serve` started in `dir` with defaults but the address; killed on drop, and its
/// directory (with the binary's copy, over 100 MB in a debug build) removed.
struct Alone {
    child: Child,
    url: String,
    dir: std::path::PathBuf,
}

impl Drop for Alone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_alone(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("berth");
    std::fs::copy(berth_bin(), &bin).expect("copy the binary");
    bin
}

/// Starts the copied binary. The other test of this file may be copying its own binary
/// meanwhile: a process it spawns holds that copy's write descriptor until its exec, and an
/// exec of the copy then fails with ETXTBSY (rust-lang/rust#114554). That passes within
/// milliseconds, so the start is tried again until a deadline.
fn spawn_copy(cmd: &mut Command) -> Child {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            started => return started.expect("the copied berth starts"),
        }
    }
}

fn empty_dir(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("berth_alone_{name}_{}_{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn serve_alone(dir: &Path, bin: &Path) -> Alone {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let child = spawn_copy(
        Command::new(bin)
            .args(["serve", "--anonymous", "--addr", &format!("127.0.0.1:{port}")])
            .current_dir(dir)
            .env_remove("BERTH_SITE_ROOT")
            .env_remove("BERTH_DATABASE_URL")
            .env_remove("BERTH_DATA_DIR")
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    );
    let alone = Alone { child, url: format!("http://127.0.0.1:{port}"), dir: dir.to_path_buf() };
    let ready = format!("{}/readyz", alone.url);
    wait_until("the copied berth to be ready", Duration::from_secs(30), async || {
        match reqwest::get(&ready).await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!("{other:?}; log: {}", std::fs::read_to_string(dir.join("server.log")).unwrap_or_default())),
        }
    })
    .await;
    alone
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_alone_serves_the_dashboard() {
    let dir = empty_dir("serve");
    let bin = copy_alone(&dir);
    let size = std::fs::metadata(&bin).unwrap().len();
    println!("berth binary: {size} B ({:.1} MiB)", size as f64 / (1024.0 * 1024.0));

    let version = spawn_copy(Command::new(&bin).arg("version").current_dir(&dir).stdout(std::process::Stdio::piped())).wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(version.status.success(), "berth version: {printed}");
    assert!(printed.starts_with(&format!("berth {} (commit ", env!("CARGO_PKG_VERSION"))), "{printed}");
    assert!(!printed.contains("(commit unknown)"), "built in a git checkout, so the commit is known: {printed}");

    let server = serve_alone(&dir, &bin).await;
    assert!(dir.join("data/berth.db").is_file(), "the default SQLite database is created under the working directory");
    let http = reqwest::Client::new();

    // The page links the files the binary carries, by content-hashed names, and lists them
    // for the scripts it loads later (ECharts, the YAML editor).
    let page = http.get(format!("{}/", server.url)).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    let names = files_listed(&html);
    for (file, mime, magic) in [
        ("berth.js", "javascript", &b""[..]),
        ("berth_bg.wasm", "application/wasm", &b"\0asm"[..]),
        ("berth.css", "text/css", &b""[..]),
        ("echarts.min.js", "javascript", &b""[..]),
        ("yaml-editor.js", "javascript", &b""[..]),
    ] {
        let hashed = names[file].as_str().unwrap_or_else(|| panic!("{file} is listed: {names}"));
        let (stem, ext) = file.rsplit_once('.').unwrap();
        // Its own hash in its name (berth.<hash>.css), or the app's files in a directory named
        // by the hash of them all (app.<hash>/berth.js).
        let hash = match hashed.strip_prefix("app.").and_then(|h| h.strip_suffix(&format!("/{file}"))) {
            Some(dir_hash) => dir_hash,
            None => hashed.strip_prefix(&format!("{stem}.")).and_then(|h| h.strip_suffix(&format!(".{ext}"))).unwrap_or(""),
        };
        assert!(hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()), "{file} is named by its content hash: {hashed}");
        if file != "echarts.min.js" && file != "yaml-editor.js" {
            assert!(html.contains(&format!("/pkg/{hashed}")), "the page links {hashed}");
        }
        let url = format!("{}/pkg/{hashed}", server.url);
        let plain = http.get(&url).header("accept-encoding", "identity").send().await.unwrap();
        assert_eq!(plain.status().as_u16(), 200, "{file}");
        let header = |r: &reqwest::Response, h: &str| r.headers().get(h).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        assert!(header(&plain, "content-type").contains(mime), "{file}: {}", header(&plain, "content-type"));
        assert_eq!(header(&plain, "cache-control"), "public, max-age=31536000, immutable", "{file}");
        assert_eq!(header(&plain, "content-encoding"), "", "{file}: not compressed unless asked");
        let etag = header(&plain, "etag");
        assert!(etag.starts_with('"'), "{file}: a strong ETag, got {etag:?}");
        let body = plain.bytes().await.unwrap();
        assert!(body.len() > 1000 && body.starts_with(magic), "{file}: {} B", body.len());

        // Precompressed: brotli when the client takes it (browsers do), else gzip.
        let mut tags = vec![(etag, "identity")];
        for (accept, coding, magic) in [("gzip, deflate, br", "br", &[][..]), ("gzip", "gzip", &[0x1f, 0x8b][..])] {
            let r = http.get(&url).header("accept-encoding", accept).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            assert_eq!(header(&r, "content-encoding"), coding, "{file} for {accept}");
            assert_eq!(header(&r, "vary"), "accept-encoding", "{file}");
            tags.push((header(&r, "etag"), accept));
            let packed = r.bytes().await.unwrap();
            assert!(packed.starts_with(magic) && packed.len() < body.len(), "{file}: {coding} {} B vs {} B", packed.len(), body.len());
        }
        // A browser revalidating its copy is told it is current.
        for (tag, encoding) in &tags {
            let again = http.get(&url).header("if-none-match", tag).header("accept-encoding", *encoding).send().await.unwrap();
            assert_eq!(again.status().as_u16(), 304, "{file} with {encoding}");
        }
    }
    // Only the hashed names are served: a plain one would be cached under a name that changes.
    for missing in ["berth.js", "nothing-here.js", "../Cargo.toml"] {
        let r = http.get(format!("{}/pkg/{missing}", server.url)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 404, "{missing}");
    }
}

/// The JSON list of file names in a page's head.
fn files_listed(html: &str) -> serde_json::Value {
    let start = html.find("id=\"berth-files\"").expect("the page lists its files");
    let json = &html[start..];
    let json = &json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()];
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// `BERTH_SITE_ROOT` still wins, so a developer can serve a fresh frontend build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_root_overrides_the_built_in_files() {
    let dir = empty_dir("override");
    let bin = copy_alone(&dir);
    let site = dir.join("site/pkg");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("berth.css"), "/* from the site root */ body { color: red }").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = spawn_copy(
        Command::new(&bin)
            .args(["serve", "--anonymous", "--addr", &format!("127.0.0.1:{port}")])
            .current_dir(&dir)
            .env("BERTH_SITE_ROOT", dir.join("site"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    let server = Alone { child, url: format!("http://127.0.0.1:{port}"), dir: dir.clone() };
    let css = format!("{}/pkg/berth.css", server.url);
    let body = wait_until("the server to answer with the site root's file", Duration::from_secs(30), async || {
        match reqwest::get(&css).await {
            Ok(r) if r.status().is_success() => Ok(r.text().await.unwrap_or_default()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(body.contains("from the site root"), "{body}");
}
