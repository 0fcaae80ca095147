"""Playbooks (what other tools call runbooks): YAML files that chain collect, diagnose, evict and relaunch.

model        the loaded playbook: steps, StepType (the one set of action kinds), trigger and gate
loader       safe YAML: size, depth and alias limits, lines kept for error messages
validation   the schema (pydantic) and cross-references -> Playbook; built-ins and files
expr         the `when:` / `${...}` expression language (no Python evaluated)
actions      typed actions built from a step's rendered parameters, checked before they run
planner      pure: playbook + typed findings + state -> each step's decision and reason
executor     the one loop: performs the planner's decisions, records every step
audit        the incident audit log (one writer, one reader)
notify       notifications: webhook, apprise (Slack, PagerDuty, e-mail, ...), command
redact       secrets out of every record, log line and error
probe_remote the collective self-test on real hosts over SSH
"""
