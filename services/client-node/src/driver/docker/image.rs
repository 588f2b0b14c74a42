//! A task's image: used as the daemon has it when it is there and not
//! tagged `latest`, pulled otherwise (or with `force_pull`), as Nomad's
//! image coordinator does; and images this driver pulled are removed once
//! no task has used them for `gc.image_delay`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{CreateImageOptions, RemoveImageOptions};
use futures::StreamExt;
use parking_lot::Mutex;

use super::daemon::{message, not_found};
use super::task_config::is_latest;
use crate::driver::DriverError;

/// Makes `image` (a reference with its tag) present; returns its id and
/// whether it was pulled.
pub async fn ensure(
    docker: &Docker,
    image: &str,
    force_pull: bool,
    timeout: Duration,
) -> Result<(String, bool), DriverError> {
    if !force_pull && !is_latest(image) {
        match docker.inspect_image(image).await {
            Ok(found) => return Ok((found.id.unwrap_or_default(), false)),
            Err(e) if not_found(&e) => {}
            Err(e) => {
                return Err(DriverError::recoverable(format!(
                    "Failed to inspect image `{image}`: {}",
                    message(&e)
                )));
            }
        }
    }
    let failed = |why: String| DriverError::recoverable(format!("Failed to pull `{image}`: {why}"));
    let (repo, tag) = split(image);
    let options = CreateImageOptions {
        from_image: Some(repo.to_string()),
        tag: tag.map(str::to_string),
        ..Default::default()
    };
    let pull = async {
        let mut progress = docker.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            step.map_err(|e| message(&e))?;
        }
        Ok::<(), String>(())
    };
    match tokio::time::timeout(timeout, pull).await {
        Err(_) => return Err(failed(format!("timed out after {timeout:?}"))),
        Ok(Err(why)) => return Err(failed(why)),
        Ok(Ok(())) => {}
    }
    let found = docker
        .inspect_image(image)
        .await
        .map_err(|e| failed(message(&e)))?;
    Ok((found.id.unwrap_or_default(), true))
}

/// `repo[:tag]` split for a pull (a `repo@digest` reference is pulled whole).
fn split(image: &str) -> (&str, Option<&str>) {
    if image.contains('@') {
        return (image, None);
    }
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag)),
        _ => (image, None),
    }
}

/// Who uses which image this driver pulled, to remove those no task uses.
#[derive(Debug, Default)]
pub struct ImageGc {
    /// Image id → tasks using it and a generation bumped on each change.
    users: Mutex<HashMap<String, (usize, u64)>>,
}

impl ImageGc {
    /// A task uses `image` (pulled by this driver).
    pub fn acquire(&self, image: &str) {
        let mut users = self.users.lock();
        let e = users.entry(image.to_string()).or_insert((0, 0));
        e.0 += 1;
        e.1 += 1;
    }

    /// A task stopped using `image`: once no task has used it for `delay`
    /// it is removed.
    pub fn release(self: &Arc<Self>, docker: Docker, image: &str, delay: Duration) {
        let Some(generation) = self.drop_user(image) else {
            return;
        };
        let gc = Arc::clone(self);
        let image = image.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if !gc.unused_since(&image, generation) {
                return;
            }
            match docker
                .remove_image(&image, None::<RemoveImageOptions>, None)
                .await
            {
                Ok(_) => tracing::info!(%image, "removed an image no task uses"),
                Err(e) => {
                    tracing::warn!(%image, error = %message(&e), "cannot remove an unused image")
                }
            }
        });
    }

    /// One task fewer uses `image`: the generation to check after the
    /// delay when none does now.
    fn drop_user(&self, image: &str) -> Option<u64> {
        let mut users = self.users.lock();
        let e = users.get_mut(image)?;
        e.0 = e.0.saturating_sub(1);
        e.1 += 1;
        (e.0 == 0).then_some(e.1)
    }

    /// Whether nothing used `image` since `generation` (and forgets it).
    fn unused_since(&self, image: &str, generation: u64) -> bool {
        let mut users = self.users.lock();
        match users.get(image) {
            Some((0, g)) if *g == generation => {
                users.remove(image);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_for_a_pull() {
        assert_eq!(split("redis:7"), ("redis", Some("7")));
        assert_eq!(
            split("localhost:5000/app:1"),
            ("localhost:5000/app", Some("1"))
        );
        assert_eq!(split("localhost:5000/app"), ("localhost:5000/app", None));
        assert_eq!(split("app@sha256:abc"), ("app@sha256:abc", None));
    }

    #[test]
    fn an_image_is_unused_only_when_nothing_took_it_since() {
        let gc = ImageGc::default();
        assert_eq!(gc.drop_user("never"), None, "not pulled here");
        gc.acquire("img");
        gc.acquire("img");
        assert_eq!(gc.drop_user("img"), None, "one task still uses it");
        let g = gc.drop_user("img").unwrap();
        gc.acquire("img");
        assert!(!gc.unused_since("img", g), "taken again meanwhile");
        let g = gc.drop_user("img").unwrap();
        assert!(gc.unused_since("img", g));
        assert!(!gc.unused_since("img", g), "forgotten once removed");
    }
}
