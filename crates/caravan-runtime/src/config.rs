//! Layered configuration: defaults < TOML file < `CARAVAN_<SERVICE>__<KEY>`
//! environment variables < command-line overrides.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A layer could not be read or a value has the wrong type; the message
    /// names the key.
    #[error("configuration of {service}: {source}")]
    Invalid {
        /// The service whose configuration failed.
        service: String,
        /// What the config crate reported.
        #[source]
        source: config::ConfigError,
    },
    /// The file named on the command line does not exist.
    #[error("configuration file {0} not found")]
    MissingFile(PathBuf),
    /// An override was not of the form `key=value`.
    #[error("override {0:?} is not of the form key=value")]
    BadOverride(String),
}

/// Builds a service's configuration from its layers.
#[derive(Debug, Clone)]
pub struct ConfigLoader {
    service: String,
    file: Option<PathBuf>,
    list_keys: Vec<String>,
    overrides: Vec<(String, String)>,
    env: Option<Vec<(String, String)>>,
    /// Layers over the file, under the environment, in order (sections
    /// of a file that configures several services at once).
    tables: Vec<serde_json::Value>,
}

impl ConfigLoader {
    /// A loader for `service` (e.g. `api-gateway`, read from
    /// `CARAVAN_API_GATEWAY__<KEY>`).
    pub fn new(service: impl Into<String>) -> Self {
        ConfigLoader {
            service: service.into(),
            file: None,
            list_keys: Vec::new(),
            overrides: Vec::new(),
            env: None,
            tables: Vec::new(),
        }
    }

    /// The environment variable prefix of the service, e.g. `CARAVAN_API_GATEWAY`.
    pub fn env_prefix(&self) -> String {
        format!("CARAVAN_{}", self.service.to_uppercase().replace('-', "_"))
    }

    /// Reads a TOML file; it must exist.
    pub fn file(mut self, path: Option<&Path>) -> Self {
        self.file = path.map(Path::to_path_buf);
        self
    }

    /// A layer over the file and under the environment: keys and values
    /// already read from somewhere else (`caravan server` gives each
    /// service its table of the server's file this way).
    pub fn table(mut self, table: serde_json::Value) -> Self {
        self.tables.push(table);
        self
    }

    /// Keys whose environment values are comma-separated lists.
    pub fn list_keys(mut self, keys: &[&str]) -> Self {
        self.list_keys = keys.iter().map(|k| k.to_string()).collect();
        self
    }

    /// A command-line override, the highest layer.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.overrides.push((key.into(), value.into()));
        self
    }

    /// Overrides of the form `key=value`, as given to `--set`.
    pub fn set_all<'a>(
        mut self,
        pairs: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, ConfigError> {
        for pair in pairs {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(pair.to_string()))?;
            self.overrides.push((k.trim().to_string(), v.to_string()));
        }
        Ok(self)
    }

    /// Reads these variables instead of the process environment (for tests).
    pub fn with_env(mut self, vars: Vec<(String, String)>) -> Self {
        self.env = Some(vars);
        self
    }

    /// Merges the layers over `defaults`.
    pub fn load<T: Serialize + DeserializeOwned>(&self, defaults: &T) -> Result<T, ConfigError> {
        self.merged(defaults)?
            .try_deserialize()
            .map_err(|source| self.invalid(source))
    }

    /// The keys of the layers over `defaults` that `T` does not read (a
    /// misspelt key is otherwise silently ignored), as dotted paths, except
    /// those under the top-level `sections` another loader reads (such as
    /// `shutdown`). Fails as [`ConfigLoader::load`] does on a bad value.
    pub fn unknown_keys<T: Serialize + DeserializeOwned>(
        &self,
        defaults: &T,
        sections: &[&str],
    ) -> Result<Vec<String>, ConfigError> {
        let merged = self.merged(defaults)?;
        let mut unknown = Vec::new();
        let _: T = serde_ignored::deserialize(merged, |path| unknown.push(path.to_string()))
            .map_err(|source| self.invalid(source))?;
        unknown.retain(|path| {
            let top = path.split('.').next().unwrap_or_default();
            !sections.contains(&top)
        });
        unknown.sort();
        Ok(unknown)
    }

    fn invalid(&self, source: config::ConfigError) -> ConfigError {
        ConfigError::Invalid {
            service: self.service.clone(),
            source,
        }
    }

    /// The layers merged over `defaults`, not yet read into a type.
    fn merged<T: Serialize>(&self, defaults: &T) -> Result<config::Config, ConfigError> {
        let invalid = |source| self.invalid(source);
        let mut builder = config::Config::builder()
            .add_source(config::Config::try_from(defaults).map_err(invalid)?);
        if let Some(path) = &self.file {
            if !path.exists() {
                return Err(ConfigError::MissingFile(path.clone()));
            }
            builder = builder
                .add_source(config::File::from(path.as_path()).format(config::FileFormat::Toml));
        }
        for table in &self.tables {
            builder = builder.add_source(config::Config::try_from(table).map_err(invalid)?);
        }
        let mut env = config::Environment::with_prefix(&self.env_prefix())
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true);
        if !self.list_keys.is_empty() {
            env = env.list_separator(",");
            for key in &self.list_keys {
                env = env.with_list_parse_key(key);
            }
        }
        if let Some(vars) = &self.env {
            env = env.source(Some(vars.iter().cloned().collect()));
        }
        builder = builder.add_source(env);
        for (key, value) in &self.overrides {
            builder = if self.list_keys.contains(key) {
                let items: Vec<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(String::from)
                    .collect();
                builder.set_override(key.as_str(), items)
            } else {
                builder.set_override(key.as_str(), value.as_str())
            }
            .map_err(invalid)?;
        }
        builder.build().map_err(invalid)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Store {
        endpoints: Vec<String>,
        prefix: String,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Conf {
        grpc_addr: String,
        workers: u32,
        store: Store,
    }

    fn defaults() -> Conf {
        Conf {
            grpc_addr: "127.0.0.1:4647".into(),
            workers: 2,
            store: Store {
                endpoints: vec!["http://127.0.0.1:2379".into()],
                prefix: "/caravan".into(),
            },
        }
    }

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.toml");
        std::fs::write(
            &path,
            "workers = 4\ngrpc_addr = \"0.0.0.0:1\"\n[store]\nprefix = \"/file\"\n",
        )
        .unwrap();
        let env = vec![
            (
                "CARAVAN_SCHEDULER_WORKER__GRPC_ADDR".to_string(),
                "0.0.0.0:2".to_string(),
            ),
            (
                "CARAVAN_SCHEDULER_WORKER__STORE__ENDPOINTS".to_string(),
                "http://a:1,http://b:2".to_string(),
            ),
            ("CARAVAN_OTHER__WORKERS".to_string(), "99".to_string()),
        ];
        let conf: Conf = ConfigLoader::new("scheduler-worker")
            .file(Some(&path))
            .list_keys(&["store.endpoints"])
            .with_env(env)
            .set("store.prefix", "/flag")
            .load(&defaults())
            .unwrap();
        assert_eq!(conf.workers, 4, "file beats defaults");
        assert_eq!(conf.grpc_addr, "0.0.0.0:2", "env beats file");
        assert_eq!(conf.store.endpoints, vec!["http://a:1", "http://b:2"]);
        assert_eq!(conf.store.prefix, "/flag", "flags beat everything");
    }

    #[test]
    fn list_overrides_split_on_commas() {
        let conf: Conf = ConfigLoader::new("x")
            .with_env(vec![])
            .list_keys(&["store.endpoints"])
            .set_all(["store.endpoints=http://a:1, http://b:2"])
            .unwrap()
            .load(&defaults())
            .unwrap();
        assert_eq!(conf.store.endpoints, vec!["http://a:1", "http://b:2"]);
    }

    #[test]
    fn tables_sit_over_the_file_and_under_the_environment() {
        let conf: Conf = ConfigLoader::new("x")
            .with_env(vec![("CARAVAN_X__WORKERS".to_string(), "7".to_string())])
            .table(serde_json::json!({ "store": { "prefix": "/shared" }, "workers": 3 }))
            .table(serde_json::json!({ "grpc_addr": "0.0.0.0:9" }))
            .load(&defaults())
            .unwrap();
        assert_eq!(conf.store.prefix, "/shared");
        assert_eq!(
            conf.store.endpoints,
            defaults().store.endpoints,
            "a table merges"
        );
        assert_eq!(conf.grpc_addr, "0.0.0.0:9");
        assert_eq!(conf.workers, 7, "env beats tables");
    }

    #[test]
    fn defaults_alone() {
        let conf: Conf = ConfigLoader::new("x")
            .with_env(vec![])
            .load(&defaults())
            .unwrap();
        assert_eq!(conf, defaults());
    }

    #[test]
    fn bad_value_names_the_key() {
        let err = ConfigLoader::new("x")
            .with_env(vec![("CARAVAN_X__WORKERS".into(), "many".into())])
            .load(&defaults())
            .unwrap_err();
        assert!(err.to_string().contains("workers"), "{err}");
    }

    #[test]
    fn missing_file_and_bad_override_are_errors() {
        let missing = ConfigLoader::new("x")
            .file(Some(Path::new("/nonexistent/c.toml")))
            .load(&defaults());
        assert!(matches!(missing, Err(ConfigError::MissingFile(_))));
        assert!(matches!(
            ConfigLoader::new("x").set_all(["novalue"]),
            Err(ConfigError::BadOverride(_))
        ));
    }

    #[test]
    fn unknown_keys_are_named_by_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.toml");
        std::fs::write(
            &path,
            "workers = 4\nworkerz = 5\n[store]\nprefx = \"/a\"\n[shutdown]\ndeadline_ms = 1\n",
        )
        .unwrap();
        let loader = ConfigLoader::new("x")
            .file(Some(&path))
            .with_env(vec![("CARAVAN_X__GRPC_ADR".into(), "0.0.0.0:1".into())]);
        let unknown = loader.unknown_keys(&defaults(), &["shutdown"]).unwrap();
        assert_eq!(unknown, vec!["grpc_adr", "store.prefx", "workerz"]);
        let known = ConfigLoader::new("x")
            .with_env(vec![("CARAVAN_X__WORKERS".into(), "3".into())])
            .set_all(["store.prefix=/b"])
            .unwrap();
        assert!(known.unknown_keys(&defaults(), &[]).unwrap().is_empty());
    }
}
