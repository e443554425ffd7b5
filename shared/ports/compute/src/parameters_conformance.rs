//! The scenario every [`NodeParameters`] adapter must pass, run by this
//! crate's tests against [`crate::SimulatedParameters`] and by
//! `floe-parameters-ssm`'s against Parameter Store on moto. Test support: it
//! works below a root path the caller makes unique, so that runs can share
//! one store, and reports the first broken expectation as an error.

use crate::ComputeError;
use crate::parameters::{
    INITIAL_MASTER_NODES, INVALID_PARAMETER, NodeParameters, REPOSITORY_ACCESS_KEY,
    REPOSITORY_SECRET_KEY, REPOSITORY_SESSION_TOKEN, SecretOrPlain, deployment_path,
    initial_master_nodes, parameter_name,
};

pub type ScenarioResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// How many parameters the scenario puts under one deployment: more than
/// two pages of Parameter Store's largest page (10), and not a multiple of it.
pub const DEPLOYMENT_PARAMETERS: usize = 23;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> ScenarioResult {
    if ok { Ok(()) } else { Err(what().into()) }
}

fn is_invalid(result: &Result<impl std::fmt::Debug, ComputeError>) -> bool {
    matches!(result, Err(ComputeError::Permanent { failure_type, .. }) if failure_type == INVALID_PARAMETER)
}

/// The names (relative to a deployment's path) of the scenario's
/// [`DEPLOYMENT_PARAMETERS`] parameters: the real ones, and filler at
/// several depths.
pub fn deployment_parameter_names() -> Vec<String> {
    let mut names: Vec<String> = [
        INITIAL_MASTER_NODES,
        REPOSITORY_ACCESS_KEY,
        REPOSITORY_SECRET_KEY,
        REPOSITORY_SESSION_TOKEN,
    ]
    .iter()
    .map(|n| n.to_string())
    .collect();
    let mut n = 0;
    while names.len() < DEPLOYMENT_PARAMETERS {
        names.push(match n % 3 {
            0 => format!("filler-{n}"),
            1 => format!("groups/hot/filler-{n}"),
            _ => format!("groups/warm/deep/filler-{n}"),
        });
        n += 1;
    }
    names
}

/// Runs every expectation of the port below `root` (such as
/// `/floe-test/<uuid>`), which must hold no parameter yet; leaves nothing
/// behind when it succeeds.
pub async fn scenario(params: &dyn NodeParameters, root: &str) -> ScenarioResult {
    let dep_a = deployment_path(root, "dep-a");
    let dep_b = deployment_path(root, "dep-b");
    // Shares dep-a's text as a prefix but is another deployment.
    let dep_a_lookalike = deployment_path(root, "dep-ab");

    // Put and get, one of each type.
    let masters = parameter_name(&dep_a, INITIAL_MASTER_NODES);
    ensure(params.get(&masters).await?.is_none(), || {
        format!("{masters} exists before it was put")
    })?;
    let ids = initial_master_nodes(&["i-0a1", "i-0b2", "i-0c3"])?;
    params.put(&masters, &ids).await?;
    let got = params.get(&masters).await?;
    ensure(got.as_ref() == Some(&ids), || {
        format!("{masters}: put {ids:?}, got {got:?}")
    })?;

    let secret_key = parameter_name(&dep_a, REPOSITORY_SECRET_KEY);
    let secret = SecretOrPlain::secret("wJalrXUtnFEMI/K7MDENG+bPxRfiCY");
    params.put(&secret_key, &secret).await?;
    let got = params.get(&secret_key).await?;
    ensure(got.as_ref() == Some(&secret), || {
        // Debug hides the values; say which part differs.
        format!(
            "{secret_key}: got {:?} (a secret: {:?}), not the secret that was put",
            got.as_ref().map(|_| "a value"),
            got.as_ref().map(SecretOrPlain::is_secret)
        )
    })?;

    // Put overwrites, also with the same value, also across types.
    let fewer = initial_master_nodes(&["i-0a1"])?;
    params.put(&masters, &fewer).await?;
    params.put(&masters, &fewer).await?;
    let got = params.get(&masters).await?;
    ensure(got.as_ref() == Some(&fewer), || {
        format!("{masters}: overwritten with {fewer:?}, got {got:?}")
    })?;
    let retyped = SecretOrPlain::secret("i-0a1");
    params.put(&masters, &retyped).await?;
    ensure(
        params.get(&masters).await?.as_ref() == Some(&retyped),
        || format!("{masters}: a plain value overwritten by a secret is not that secret"),
    )?;
    params.put(&masters, &fewer).await?;
    ensure(params.get(&masters).await?.as_ref() == Some(&fewer), || {
        format!("{masters}: a secret overwritten by a plain value is not that value")
    })?;

    // Delete, and delete again.
    params.delete(&masters).await?;
    ensure(params.get(&masters).await?.is_none(), || {
        format!("{masters} is still there after its delete")
    })?;
    params.delete(&masters).await?;
    params
        .delete(&parameter_name(&dep_a, "never-written"))
        .await?;

    // Names and values Parameter Store refuses are refused, with the same
    // failure type on every adapter.
    let empty = params.put(&masters, &SecretOrPlain::plain("")).await;
    ensure(is_invalid(&empty), || format!("an empty value: {empty:?}"))?;
    let unrooted = params.put("floe/no-root", &fewer).await;
    ensure(is_invalid(&unrooted), || {
        format!("a hierarchy without a leading '/': {unrooted:?}")
    })?;
    let relative = params.delete_under("floe").await;
    ensure(is_invalid(&relative), || {
        format!("delete_under a relative path: {relative:?}")
    })?;

    // delete_under: all of one deployment's parameters, at every depth and
    // over several pages, and nothing of another deployment's.
    let a_names: Vec<String> = deployment_parameter_names()
        .iter()
        .map(|n| parameter_name(&dep_a, n))
        .collect();
    for (i, name) in a_names.iter().enumerate() {
        let value = if i % 2 == 0 {
            SecretOrPlain::plain(format!("value-{i}"))
        } else {
            SecretOrPlain::secret(format!("secret-{i}"))
        };
        params.put(name, &value).await?;
    }
    let survivors = [
        parameter_name(&dep_b, INITIAL_MASTER_NODES),
        parameter_name(&dep_b, REPOSITORY_ACCESS_KEY),
        parameter_name(&dep_a_lookalike, INITIAL_MASTER_NODES),
        // A parameter named like the path itself is not under it.
        dep_a.clone(),
    ];
    for name in &survivors {
        params.put(name, &SecretOrPlain::plain("i-0ff")).await?;
    }

    let deleted = params.delete_under(&dep_a).await?;
    ensure(deleted == DEPLOYMENT_PARAMETERS, || {
        format!("delete_under({dep_a}) deleted {deleted}, not {DEPLOYMENT_PARAMETERS}")
    })?;
    for name in &a_names {
        ensure(params.get(name).await?.is_none(), || {
            format!("{name} survived delete_under({dep_a})")
        })?;
    }
    for name in &survivors {
        ensure(params.get(name).await?.is_some(), || {
            format!("delete_under({dep_a}) deleted {name}")
        })?;
    }
    let again = params.delete_under(&dep_a).await?;
    ensure(again == 0, || {
        format!("a second delete_under({dep_a}) deleted {again}")
    })?;

    // A trailing slash means the same path; then clean up.
    let b_with_slash = format!("{dep_b}/");
    let deleted = params.delete_under(&b_with_slash).await?;
    ensure(deleted == 2, || {
        format!("delete_under({b_with_slash}) deleted {deleted}, not 2")
    })?;
    let rest = params.delete_under(root).await?;
    ensure(rest == 2, || {
        format!("delete_under({root}) deleted {rest}, not the 2 left")
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deployment_has_the_boot_parameters_and_distinct_names() {
        let names = deployment_parameter_names();
        assert_eq!(names.len(), DEPLOYMENT_PARAMETERS);
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        assert!(names.iter().any(|n| n == INITIAL_MASTER_NODES));
    }
}
