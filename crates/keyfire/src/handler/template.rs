//! The `{{job_id}}`, `{{firing_id}}`, `{{scheduled_at}}` and `{{attempt}}` placeholders that
//! the `http` and `command` handlers fill in from a firing.

use super::Firing;

/// Replace `{{job_id}}`, `{{firing_id}}`, `{{scheduled_at}}` and `{{attempt}}` with the
/// firing's values; anything else is left as written.
pub(crate) fn render(template: &str, f: &Firing) -> String {
    render_fields(template, &f.job_id, &f.firing_id, f.scheduled_at, f.attempt)
}

pub(crate) fn render_fields(
    template: &str,
    job_id: &str,
    firing_id: &str,
    scheduled_at: chrono::DateTime<chrono::Utc>,
    attempt: u32,
) -> String {
    if !template.contains("{{") {
        return template.to_string();
    }
    template
        .replace("{{job_id}}", job_id)
        .replace("{{firing_id}}", firing_id)
        .replace(
            "{{scheduled_at}}",
            &scheduled_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
        .replace("{{attempt}}", &attempt.to_string())
}
