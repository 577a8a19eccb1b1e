"""The words Versions says: every message a person or an agent reads when something is
refused or needs saying, in one place so that doors, services and tests share them."""

from versions.terms import MANAGE, NAME, PROMOTE, RESTORE, REVIEW, VIEW, WRITE

# access
NO_VIEW = "You are signed in but may not view change sets. Ask an admin for the view permission."
TOKEN_REFUSED = (
    "Send a valid agent token: this one is unknown, revoked, expired, or its user is inactive."
)
NO_WORKSPACE_ROLLBACK = (
    "{who} may not roll back workspaces. Ask an admin for the restore permission; "
    "nothing was written."
)
TOKEN_CANNOT_PROMOTE = (
    "This agent token cannot promote to production or roll it back: only a token made with "
    "`create_agent_token … --can-promote` can (and its user needs the promote permission or "
    "role). Nothing was changed."
)
# Added to a refusal on an app: the role that would allow it.
NEEDS_ROLE = " That needs the role “{role}” on this app (or higher)."

# require_preconditions (docs/api.md#require-preconditions)
PRECONDITION_REQUIRED = (
    "App “{slug}” requires every write to say what it expects, and this one did not: send "
    'If-Match: "<sha256>" (the ETag you read), If-None-Match: * to create a new artifact, or '
    'expected_sha256 ("" for a new artifact). Nothing was written.'
)

# strict inputs (docs/api.md#strict-inputs)
UNKNOWN_FIELD = "unknown field `{field}`"
UNKNOWN_FIELD_DID_YOU_MEAN = "; did you mean `{known}`?"
UNKNOWN_FIELD_KNOWN = "; the known fields are {known}."
UNKNOWN_FIELD_NOTHING_KNOWN = "; this takes no fields."

# agent_writes
EDIT_OLD_TEXT_EMPTY = (
    "old_text is empty: give the exact text to replace (read the artifact first). "
    "Nothing was written."
)
EDIT_OLD_TEXT_MISSING = (
    "old_text does not occur in {collection} “{name}”: nothing to replace, nothing was written. "
    "Read it again and copy the exact text, whitespace included."
)
EDIT_OLD_TEXT_NOT_UNIQUE = (
    "old_text occurs {count} times in {collection} “{name}”: it must occur exactly once. "
    "Include more of the surrounding text so it names one place; nothing was written."
)

# apps
NO_NEW_APPS = (
    "{who} may not add apps: that needs the role “{role}” on every app (a superuser). "
    "Nothing was created."
)

# capture
ARTIFACT_NOT_FOUND = "There is no {collection} “{name}” in app “{app}”."

# deployments
# What a restore, revert or write of an app with production says
# (docs/architecture.md#environments): it changed the draft only.
PRODUCTION_STILL_SERVES = "Production still serves {deployment}; promote to ship this."
DRAFT_HOLDS_PRODUCTION = (
    "Production still serves {deployment}, just what the draft holds {when}: there is nothing "
    "to promote."
)

# members
UNKNOWN_ROLE = "There is no role “{role}”: the roles are {roles}."
UNKNOWN_USER = "There is no user “{name}”."
UNKNOWN_GROUP = "There is no group “{name}”."
ALREADY_MEMBER = "{whom} is already a member of app “{slug}” ({role}): change their role instead."
MEMBERSHIP_NOT_FOUND = "There is no such member of app “{slug}”."
LAST_OWNER = (
    "{whom} is the last owner of app “{slug}”: an app always keeps an owner. Make someone "
    "else owner first. Nothing was changed."
)

# naming
NAME_TOO_LONG = "Names are at most 200 characters."
NAME_NOT_TEXT = "A name must be text."
NAME_HAS_CONTROL = "A name cannot contain control characters."

# reading
UNKNOWN_LAYOUT = "A comparison is read “unified” or “split”, not “{layout}”."
NO_PERSON = "Only a signed-in person has review preferences; nothing was kept."
BAD_VIEWED_KEY = "That Viewed mark does not name a file of app “{slug}”; nothing was kept."

# refs
PREVIEW_NOT_ALLOWED = (
    "Previews of states other than production are for people who may view this app's "
    "versions: sign in, or open a signed preview link from the panel."
)
PREVIEW_LINK_INVALID = (
    "This preview link has expired or is not valid: open a new one from the panel."
)

# restore
NOOP_POINT_MESSAGE = (
    "The artifact already matched the state before this point — nothing was written."
)
SET_NOT_FOUND = "There is no change set “{id}”."
POINT_NOT_FOUND = "There is no restore point “{id}”."

# revert
REVERT_SET_NOT_FOUND = "There is no change set “{id}”."
REVERT_OF_RESTORE_SET = (
    "“{id}” is a restore set: take it back with Undo this restore (Restore all of that set). "
    "Revert this set takes back a change set that a writer made."
)
REVERT_NOOP_MESSAGE = (
    "Every artifact already matched its state without this set — nothing was written."
)
REVERT_CONFLICT = (
    "This set's change and later changes by {sets} touch the same lines, so this set cannot "
    "be taken back on its own. Nothing was written; edit it by hand, or use Restore all "
    "(which also drops the later changes)."
)
REVERT_CREATED_CHANGED = (
    "This set created it and {sets} changed it since; removing it would throw that work away. "
    "Nothing was written."
)
REVERT_DELETED_RECREATED = (
    "This set deleted it and {sets} recreated it since; recreating this set's version would "
    "overwrite that work. Nothing was written."
)
REVERT_CHANGED_DELETED = (
    "This set changed it and {sets} deleted it since, so there is no source left to take "
    "this set's change out of. Nothing was written."
)
REVERT_NOT_STORED = (
    "Its source {when} this set was {size:,} bytes, over the {cap:,}-byte limit for stored "
    "sources, so it was not kept and this set's change cannot be taken back."
)
REVERT_PRUNED = (
    "A restore point of it from this set or after it was pruned by retention (only the newest "
    "{keep} unpinned points of an app are kept), so its states around this set are gone and "
    "this set's change cannot be taken back."
)

# tokens
NOT_OWNER = (
    "User “{username}” is not an owner of app “{slug}”: only an app's owners (or people with "
    "a global permission) may hold its agent tokens, and a token never acts beyond its user's "
    "role. Nothing was created."
)

# validation
NAME_EDGE_SPACES = (
    "Artifact names cannot begin or end with spaces (got “{name}”): nobody could see them in a "
    "list. Name it “{stripped}”. Nothing was written."
)
NAME_LOOKS_LIKE = (
    "The name “{name}” looks like “{existing}”, which this app already has among its "
    "{collection} artifacts: people could not tell the two apart. Write to “{existing}”, or "
    "choose a name that looks different. Nothing was written."
)
SLUG_LOOKS_LIKE = (
    "The slug “{slug}” looks like the slug of the app “{existing}”: people could not tell the "
    "two apart. Choose a slug that looks different."
)
SOURCE_TOO_LARGE = (
    "The source is {size:,} bytes; the most a write accepts is {limit:,} bytes. "
    "Nothing was written."
)
MESSAGE_TOO_LONG = (
    "The message is {length:,} characters; a message is at most {limit:,} (like a commit "
    "message). Nothing was written."
)
MESSAGE_HAS_CONTROL = (
    "The message cannot contain control characters other than newline and tab (found {char} "
    "at {pos}). Nothing was written."
)

# access
# What an actor lacking an action is told; {who} names the person or the token's user.
NEEDS = {
    WRITE: "{who} may not write to app “{slug}”; nothing was written.",
    VIEW: "{who} may not view app “{slug}”. Ask an admin for the view permission.",
    NAME: (
        "{who} may not name change sets or mark releases of app “{slug}”. "
        "Ask an admin for that permission; nothing was changed."
    ),
    RESTORE: (
        "{who} may not restore app “{slug}”. "
        "Ask an admin for the restore permission; nothing was written."
    ),
    PROMOTE: (
        "{who} may not promote or roll back production of app “{slug}”. "
        "Ask an admin for the promote permission; nothing was changed."
    ),
    MANAGE: "{who} may not manage the members or agent tokens of app “{slug}”.",
    REVIEW: "{who} may not review change sets of app “{slug}”; nothing was submitted.",
}

# engine
NOOP_MESSAGE = "Every artifact already matched the state before this set — nothing was written."

# portable
LOAD_ID_TAKEN = (
    "The archive's {kind} {id} already exists here for another app; nothing was loaded (ids are "
    "kept: load into a Versions whose ids do not overlap, such as a new one)."
)

# portable
LOAD_SLUG_EXISTS = "There is already an app “{slug}” here; nothing was loaded."

# portable
LOAD_UNKNOWN_VERSION = (
    "{file} is a Versions app archive of format version {version}; this Versions reads version "
    "{known} only. Nothing was loaded."
)

# access
APP_NOT_FOUND = "There is no app “{slug}”."

# reviews (docs/architecture.md#reviews)
TOKEN_CANNOT_REVIEW = (
    "Agent tokens never review: reviews, line comments and resolving threads are for people "
    "with the role “reviewer” (or higher). An agent may read reviews and reply to comments. "
    "Nothing was submitted."
)
UNKNOWN_VERDICT = "A review's verdict is approve, request_changes or comment, not “{verdict}”."
BODY_NOT_TEXT = "A review or comment body must be text."
BODY_HAS_CONTROL = (
    "A review or comment body cannot contain control characters other than line breaks and "
    "tabs; nothing was submitted."
)
BODY_TOO_LONG = (
    "A review or comment body is at most {limit:,} characters; this one has {count:,}. "
    "Nothing was submitted."
)
COMMENT_BODY_EMPTY = "A comment needs a body; nothing was submitted."
REVIEW_BODY_NEEDED = (
    "Requesting changes or commenting needs a body saying what; nothing was submitted."
)
COMMENT_NOT_FOUND = "There is no comment “{id}”."
BAD_SIDE = "A line comment is on the “before” or “after” side of a diff, not “{side}”."
BAD_LINE = "A line comment names a line from 1 to {count} of that side; {line} is not one."
NOT_IN_SET = (
    "Change set “{set}” did not change {collection} “{name}”: there is no diff line to comment on."
)
ADDRESSES_NOT_LIST = (
    "addresses is a list of at most {limit} comment ids (cm_…) of this app; nothing was written."
)
ADDRESS_UNKNOWN = (
    "addresses names “{id}”, which is not a comment thread of app “{slug}”; nothing was written."
)
LINE_CHANGED_SINCE = (
    "That line of {collection} “{name}” changed since the diff was shown: reload it and "
    "comment again. Nothing was submitted."
)
NO_SET_FOR_LINE = (
    "No change set of this app wrote that state of {collection} “{name}”, so a comment there "
    "would have no set to sit on. Comment on the set's own diff instead."
)
SIDE_NOT_AVAILABLE = "That side of {collection} “{name}” is not available in this set: {reason}"
OVERRIDE_NOT_OWNER = (
    "Only an owner of app “{slug}” may promote anyway past its protection. Nothing was promoted."
)
OVERRIDE_REASON_NEEDED = (
    "Promoting anyway needs a reason (at most 500 characters); nothing was promoted."
)
PROTECTION_BAD_APPROVALS = "Required approvals is a whole number from 0 to 5."

# deployments
FINDING_PROTECTED = "Protection of this app: {lacks}."

# webhooks and notifications (docs/architecture.md#notifications)
WEBHOOK_URL_NOT_HTTP = (
    "A webhook's URL is an http:// or https:// address with a host name, without a user name "
    "or spaces (got “{url}”). Nothing was saved."
)
WEBHOOK_URL_NEEDS_HTTPS = (
    "A webhook's URL must be https:// on this server (got “{url}”): the body and its "
    "signature would travel in the clear. Nothing was saved."
)
WEBHOOK_URL_TOO_LONG = (
    "A webhook's URL is at most {limit} characters; this one has {length}. Nothing was saved."
)
WEBHOOK_URL_UNRESOLVED = (
    "The webhook's host “{host}” does not resolve to any address. Check its spelling; nothing "
    "was saved."
)
WEBHOOK_URL_PRIVATE = (
    "The webhook's host “{host}” resolves to {address}, a loopback, link-local or private "
    "address, which this server does not call (VERSIONS_WEBHOOK_ALLOW_PRIVATE=1 allows it). "
    "Nothing was saved."
)
WEBHOOK_SECRET_SHORT = (
    "A webhook's secret is {least} to {most} characters (got {length}): receivers check "
    "each body's signature with it. Nothing was saved."
)
WEBHOOK_EVENT_UNKNOWN = "There is no event “{event}”: the events are {known}. Nothing was saved."
WEBHOOK_EVENTS_NONE = "Choose at least one event for the webhook. Nothing was saved."
WEBHOOK_NOT_FOUND = "There is no webhook or delivery “{id}” in your apps."
WEBHOOK_DISABLED_MAIL = (
    "[Versions] {app}: a webhook was disabled",
    "Every delivery to the webhook {url} of {app} failed for {hours} hours, so it was "
    "disabled: no more events are sent to it.\n\nIts delivery log, on the app's Settings page "
    "in the Versions panel, shows what the receiver answered. Turn it on again there once the "
    "receiver works.",
)
WEBHOOK_ACTION_UNKNOWN = (
    "Say what to do with a webhook: add, change, delete or redeliver. Nothing was changed."
)
EMAIL_NEEDS_A_PERSON = (
    "Email notifications are a signed-in person's own choice: a token or a command has no "
    "address to send them to. Nothing was changed."
)
# Safe promotion (docs/architecture.md#safe-promotion): checks, rollouts, the watch,
# schedules, freezes and locks.
CHECK_PATH_ESCAPES = (
    "A check's path must stay inside the app: “/”, “/p/<page>”, “/assets/<name>.css|.js” or "
    "“/api/…”, as below /apps/<slug>/; “{path}” is not one. Nothing was saved."
)
CHECK_BAD_NAME = "A check needs a name of 1 to 80 characters, without control characters."
CHECK_NAME_TAKEN = "App “{slug}” already has a check named “{name}”. Nothing was saved."
CHECK_BAD_METHOD = "A check's method is GET or HEAD, not “{method}”."
CHECK_BAD_STATUS = "A check expects an HTTP status from 100 to 599, not “{status}”."
CHECK_BAD_TEXT = "A check's expected text is at most 200 characters, without control characters."
CHECK_TOO_MANY = "App “{slug}” has {limit} checks already, the most an app may have."
CHECK_NOT_FOUND = "App “{slug}” has no check “{name}”."
CHECKS_OVERRIDE_NOT_OWNER = (
    "Only an owner of app “{slug}” may promote anyway past failing checks. Nothing was promoted."
)
CHECK_PASSED = "Answered {status} as expected."
CHECK_WRONG_STATUS = "Answered {status}; expected {expected}."
CHECK_TEXT_MISSING = "Answered {status}, but the answer does not contain “{text}”."
CHECK_CRASHED = "The request could not be answered: {error}."
BUILTIN_ROUTES = "Routes valid and unique"
BUILTIN_PAGES = "Pages parse as HTML"
BUILTIN_ASSETS = "Assets referenced by pages exist"
BUILTIN_ROUTES_OK = "{count} route spec{s} valid, no two on one method and path."
BUILTIN_ROUTES_BAD = "{count} route problem{s}: see the findings."
BUILTIN_PAGES_OK = "{count} page{s} parsed."
BUILTIN_PAGES_BAD = "Page “{page}”: {problem}"
BUILTIN_ASSETS_OK = "{count} relative asset reference{s} found in the state."
BUILTIN_ASSETS_BAD = "Page “{page}” references “{ref}”, which is not in this state."
PAGE_UNCLOSED = "<{tag}> is never closed, so the rest of the page is read as its content"
PAGE_STRAY_END = "</{tag}> on line {line} closes nothing that is open"
FINDING_CHECK_FAILED = "Check “{name}” failed: {detail}"
CHECK_COLLECTION = "check"
ROLLOUT_BAD_SHARE = (
    "A rollout serves the candidate to 1 to 99 percent of visitors; “{share}” is not a whole "
    "number in that range. Nothing changed."
)
ROLLOUT_NEEDS_PRODUCTION = (
    "App “{slug}” has no production deployment: a rollout shares visitors between production "
    "and a candidate. Promote to production first."
)
ROLLOUT_ALREADY_RUNNING = (
    "A rollout of {candidate} is already running ({share} % of visitors): complete or abort it "
    "before starting another or promoting."
)
NO_ROLLOUT = "App “{slug}” has no rollout running: start one with Start rollout."
ROLLOUT_NOTHING_ASKED = (
    "Say what the rollout should do: “to” (1 to 99, the share of visitors) starts or advances "
    "it; “action” (“complete” or “abort”) ends it. Nothing changed."
)
ROLLOUT_BAD_ACTION = "A rollout action is “complete” or “abort”, not “{action}”."
ROLLOUT_STARTED_MESSAGE = "Rollout started: {deployment} serves {share} % of visitors."
ROLLOUT_ADVANCED_MESSAGE = "Rollout advanced: {deployment} serves {share} % of visitors."
ROLLOUT_COMPLETED_MESSAGE = "Rollout completed: production now serves {deployment} to everyone."
ROLLOUT_ABORTED_MESSAGE = (
    "Rollout aborted: everyone is served production {deployment} again; {previous} is kept."
)
AUTO_ROLLED_BACK_MESSAGE = "Rolled back automatically from {previous} to {deployment}: {cause}"
CAUSE_CHECK_FAILED = "check “{name}” failed after the promotion ({detail})"
CAUSE_ERROR_RATE = (
    "{errors} of its first {requests} answers were errors (5xx or not found), over the "
    "{rate} % bound"
)
FROZEN = (
    "Production of app “{slug}” is frozen since {since} by {by}: “{reason}”{until}. Nothing is "
    "promoted until an owner unfreezes it; rolling back is still allowed."
)
FROZEN_UNTIL = " (until {until})"
FREEZE_REASON_NEEDED = "Freezing production needs a reason (at most 500 characters)."
FREEZE_END_PAST = "A freeze's end must be in the future; {until} has passed."
NOT_FROZEN = "Production of app “{slug}” is not frozen."
ALREADY_FROZEN = "Production of app “{slug}” is already frozen."
WATCH_BAD_RATE = "The error-rate bound is a whole percentage from 1 to 100."
WATCH_BAD_MINUTES = "The watch lasts 1 to 1,440 minutes."
SCHEDULE_IN_PAST = (
    "A promotion can only be scheduled in the future; {at} has passed (it is {now} UTC). "
    "Nothing was scheduled."
)
SCHEDULE_NOT_A_TIME = "“at” must be a date and time with its offset (ISO 8601), e.g. {example}."
SCHEDULE_NOT_FOUND = "App “{slug}” has no scheduled promotion “{id}”."
SCHEDULE_NOT_PENDING = (
    "Scheduled promotion {id} is {status}: only a scheduled one can be cancelled."
)
SCHEDULED_MESSAGE = (
    "Scheduled: {ref} will be promoted at {at} as it is now ({count} artifact{s}), as {id}."
)
SCHEDULE_CANCELLED_MESSAGE = "Scheduled promotion {id} was cancelled; nothing will be promoted."
SCHEDULE_WITH_ROLLOUT = "A scheduled promotion promotes to everyone; a rollout cannot be scheduled."
LOCKED_BY_OWNER = (
    "{collection} “{name}” of app “{slug}” is locked by {by}{reason}: agents may not write it. "
    "Nothing was written; ask an owner of the app to unlock it."
)
# A restore's pre-flight finding, for an agent's restore of a locked artifact.
FINDING_LOCKED = (
    "It is locked by {by}{reason}: an agent may not write it. A person may restore it, or an "
    "owner unlock it."
)
LOCK_NOT_FOUND = "{collection} “{name}” of app “{slug}” is not locked."
LOCK_ARTIFACT_MISSING = "App “{slug}” has no {collection} “{name}” to lock."
LOCK_EXISTS = "{collection} “{name}” of app “{slug}” is locked already."
