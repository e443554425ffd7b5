//! The deployed stack, for the tests that deploy `infra/template.yaml` into
//! moto's CloudFormation (tests/stack/deploy_stack.py) and hold what it made
//! to what the code needs, or run the platform on it.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

pub type StackError = Box<dyn std::error::Error>;

/// One run of the deploy script: `create` or `update` stack `name`, with the
/// parameter changes `set` and, on create, the VPC range `cidr`.
#[derive(Debug, Clone, Default)]
pub struct Deploy<'a> {
    pub action: &'a str,
    pub name: &'a str,
    pub set: Vec<String>,
    pub cidr: Option<&'a str>,
}

impl Deploy<'_> {
    /// What the script saw (its JSON report), or what it said on failing.
    pub fn run(&self, endpoint: &str) -> Result<Result<Value, String>, StackError> {
        let python = std::env::var("FLOE_TEST_PYTHON").map_err(
            |_| "FLOE_TEST_PYTHON is not set: run scripts/test.sh, which installs .venv",
        )?;
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(PathBuf::from)
            .ok_or("no workspace root")?;
        // The release zips scripts/test.sh builds into target/lambda before
        // the tests run (the script packages a stand-in where one is missing).
        let mut command = Command::new(python);
        command
            .arg(root.join("tests/stack/deploy_stack.py"))
            .arg(self.action)
            .arg(root.join("infra/template.yaml"))
            .arg(self.name)
            .arg("--zip-dir")
            .arg(root.join("target/lambda"))
            .env("FLOE_TEST_AWS_ENDPOINT", endpoint)
            .env("AWS_REGION", "us-east-1");
        if let Some(cidr) = self.cidr {
            command.arg("--cidr").arg(cidr);
        }
        for change in &self.set {
            command.arg("--set").arg(change);
        }
        let out = command.output()?;
        if !out.status.success() {
            return Ok(Err(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        Ok(Ok(serde_json::from_slice(&out.stdout)?))
    }
}

/// A function's environment as it starts: the variables the stack set, and
/// the one Lambda's runtime sets that the functions read (`AWS_REGION`).
pub fn environment(stack: &Value, function: &str) -> Vec<(String, String)> {
    let mut vars = stack_variables(stack, function);
    vars.push(("AWS_REGION".into(), "us-east-1".into()));
    vars
}

/// The variables the stack set on `function` (a logical id), as it set them.
pub fn stack_variables(stack: &Value, function: &str) -> Vec<(String, String)> {
    stack["functions"][function]["environment"]
        .as_object()
        .map(|vars| {
            vars.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// A string the report holds at `pointer`, or an error naming it.
pub fn string_at<'a>(stack: &'a Value, pointer: &str) -> Result<&'a str, String> {
    stack
        .pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no {pointer} in the stack's report"))
}
