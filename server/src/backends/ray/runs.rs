//! Sending runs to Ray and stopping them: a submission (with the packages it needs uploaded
//! first) and a stop.

use super::*;

/// Submissions of one cycle sent to Ray at once: one after another, the fourth of four
/// admitted together reached Ray about 100 ms after its admission (each submission takes
/// Ray tens of ms), which was the tail of Berth's added latency.
pub(super) const START_CONCURRENCY: usize = 8;

impl RayBackend {
    pub(super) async fn submit(&self, spec: StartSpec) -> Result<String, BackendError> {
        let key = spec.run.key();
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(BackendError::Failed(format!("run id `{key}` is not a valid Ray submission id")));
        }
        if let Some(why) = self.lock_unreachable().clone() {
            return Err(BackendError::Unavailable(why));
        }
        self.ensure_packages(&spec).await?;
        let mut body = submission(&spec, &self.real_label_keys());
        if let Some(callback) = &self.cfg.callback_url {
            // Watched (not yet polled) before Ray has it: the run may report its end
            // before Ray's answer to the submission arrives.
            let token = exits::new_token();
            exits::reporting(&mut body, &key, callback, &token);
            let mut watch = Watch::new(spec.run.clone(), false, Instant::now() + UNPOLLED);
            watch.token = Some(token);
            self.lock_watched().insert(key.clone(), watch);
        }
        let (submitted_us, submitted) = (now_us(), Instant::now());
        let refused = match self.send(self.http.post(format!("{}/api/jobs/", self.base)).json(&body)).await {
            Ok(_) => None,
            // Submitted before (a restart between submit and record): it is ours.
            Err(Failure::Status(500, b)) if b.contains("already exists") => {
                tracing::info!(run = %key, "Ray already has this submission; watching it");
                None
            }
            Err(f @ (Failure::Unreachable(_) | Failure::Status(502..=504, _))) => Some(BackendError::Unavailable(self.describe(&f))),
            Err(Failure::Status(code, b)) => Some(BackendError::Failed(format!("Ray refused the job ({code}): {}", last_line(&b)))),
        };
        if let Some(e) = refused {
            self.lock_watched().remove(&key);
            return Err(e);
        }
        self.lock_ledger().hold(key.clone(), spec.node.clone(), spec.resources.clone(), submitted_us);
        // Watched already when it reports its end; polled from now on either way.
        self.lock_watched().entry(key.clone()).or_insert_with(|| Watch::new(spec.run.clone(), false, submitted)).first_poll = submitted + FIRST_POLL;
        Ok(key)
    }

    /// Uploads each package the run uses that the cluster does not have, as Ray's own client
    /// does before it submits: a `GET` of the package (which also pins it in Ray for a while),
    /// then a `PUT` of the archive when that says 404. One checked lately is not asked about
    /// again ([`PACKAGE_SEEN`]).
    async fn ensure_packages(&self, spec: &StartSpec) -> Result<(), BackendError> {
        for package in &spec.packages {
            let Some(name) = package.uri.strip_prefix("gcs://") else { continue };
            if self.lock_packages_seen().get(&package.uri).is_some_and(|at| at.elapsed() < PACKAGE_SEEN) {
                continue;
            }
            let url = format!("{}/api/packages/gcs/{name}", self.base);
            let failed = |f: Failure| match f {
                f @ (Failure::Unreachable(_) | Failure::Status(502..=504, _)) => BackendError::Unavailable(self.describe(&f)),
                f => BackendError::Failed(format!("uploading package {} to Ray: {}", package.uri, self.describe(&f))),
            };
            let checked = Instant::now();
            match self.send(self.http.get(&url)).await {
                Ok(_) => {}
                Err(Failure::Status(404, _)) => {
                    let bytes = tokio::fs::read(&package.path)
                        .await
                        .map_err(|e| BackendError::Failed(format!("reading package {} ({}): {e}", package.uri, package.path.display())))?;
                    self.send(self.http.put(&url).body(bytes)).await.map_err(failed)?;
                    tracing::debug!(backend = %self.cfg.name, package = %package.uri, "package uploaded to Ray");
                }
                Err(f) => return Err(failed(f)),
            }
            self.lock_packages_seen().insert(package.uri.clone(), checked);
        }
        Ok(())
    }

    /// Label keys some Ray node really has (a selector on any other key would leave the
    /// job pending in Ray for ever: such keys are Berth's own, like `backend`).
    fn real_label_keys(&self) -> Vec<String> {
        let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        let mut keys: Vec<String> = nodes.iter().flat_map(|n| n.node.labels.keys().filter(|k| *k != "backend").cloned()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    pub(super) async fn stop_run(&self, run: &RunId) -> Result<(), BackendError> {
        let key = run.key();
        {
            let mut w = self.lock_watched();
            let e = w.entry(key.clone()).or_insert_with(|| Watch::new(run.clone(), true, Instant::now()));
            e.stopping = true;
            e.last_stop = Some(Instant::now());
        }
        match self.send(self.http.post(format!("{}/api/jobs/{key}/stop", self.base))).await {
            Ok(_) => Ok(()),
            Err(Failure::Status(404, _)) => {
                self.lock_watched().remove(&key);
                self.lock_ledger().release(&key, now_us());
                Ok(())
            }
            // Still watched: the status task sends the stop again.
            Err(f) => Err(BackendError::Unavailable(self.describe(&f))),
        }
    }
}
