"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.

Both work on the broker's ``ScramCredentialStore``.  The answers follow
Kafka's broker (``ZkAdminManager``):

* Describe with no (or an empty) user list lists every user holding a
  credential, sorted, with each mechanism's iteration count -- never a salt
  or key.  Named users: an empty name is RESOURCE_NOT_FOUND ("Username must
  not be empty"), a name given twice DUPLICATE_RESOURCE, a user without
  credentials RESOURCE_NOT_FOUND; each user is answered once.
* Alter takes deletions ``(user, mechanism)`` and upsertions ``(user,
  mechanism, iterations, salt, salted password)``: the client salts and
  hashes the password, so the broker never sees it and derives StoredKey and
  ServerKey itself.  A user whose entries include an empty name, an unknown
  mechanism (UNSUPPORTED_SASL_MECHANISM), iterations outside 4096..16384
  (UNACCEPTABLE_CREDENTIAL: "Too few/many iterations"), the same
  (user, mechanism) twice (DUPLICATE_RESOURCE) or the deletion of a
  credential that does not exist (RESOURCE_NOT_FOUND) fails as a whole; the
  other users' changes are stored together, durably, before the answer.
  New credentials apply to connections authenticating from then on.
"""

from __future__ import annotations

from collections import Counter

from twisted.logger import Logger

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.sasl.credential_store import ScramCredentialStore
from twisted_kafka.sasl.scram_credentials import BY_TYPE, credential_from_salted_password
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler

DescribeR = m.DescribeUserScramCredentialsResponse
AlterR = m.AlterUserScramCredentialsResponse

USERNAME_EMPTY = "Username must not be empty"


class DescribeUserScramCredentialsHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    cluster_operation = AclOperation.DESCRIBE        # as Kafka's KafkaApis

    def __init__(self, store: ScramCredentialStore):
        self.credentials = store

    async def handle(self, request):
        users = self.credentials.users()
        requested = None if not request.body.users else [user.name for user in request.body.users]
        results = []
        if requested is None:
            for user in sorted(users):
                results.append(self._described(user, users[user]))
        else:
            counts = Counter(requested)
            for user in dict.fromkeys(requested):
                if not user:
                    results.append(self._failed(user, ErrorCode.RESOURCE_NOT_FOUND, USERNAME_EMPTY))
                elif counts[user] > 1:
                    results.append(self._failed(user, ErrorCode.DUPLICATE_RESOURCE,
                                                "Cannot describe SCRAM credentials for the same user twice in a "
                                                f"single request: {user}"))
                elif user not in users:
                    results.append(self._failed(user, ErrorCode.RESOURCE_NOT_FOUND,
                                                f"Attempt to describe a user credential that does not exist: {user}"))
                else:
                    results.append(self._described(user, users[user]))
        return DescribeR(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)

    @staticmethod
    def _described(user, by_mechanism):
        infos = [DescribeR.DescribeUserScramCredentialsResult.CredentialInfo(
                     mechanism=mechanism.type, iterations=by_mechanism[mechanism.name].iterations)
                 for mechanism in BY_TYPE.values() if mechanism.name in by_mechanism]
        return DescribeR.DescribeUserScramCredentialsResult(user=user, error_code=ErrorCode.NONE,
                                                            error_message=None, credential_infos=infos)

    @staticmethod
    def _failed(user, error: ErrorCode, message: str):
        return DescribeR.DescribeUserScramCredentialsResult(user=user, error_code=error, error_message=message,
                                                            credential_infos=[])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return DescribeR(throttle_time_ms=0, error_code=error, error_message=message, results=[])


class AlterUserScramCredentialsHandler(ApiHandler):
    api_key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    cluster_operation = AclOperation.ALTER           # as Kafka's KafkaApis
    log = Logger(namespace="twisted_kafka.server.AlterUserScramCredentials")

    def __init__(self, store: ScramCredentialStore):
        self.credentials = store

    async def handle(self, request):
        body = request.body
        errors: dict[str, tuple[ErrorCode, str]] = {}

        def fail(user: str, error: ErrorCode, message: str) -> None:
            errors.setdefault(user, (error, message))

        for deletion in body.deletions:
            if not deletion.name:
                fail(deletion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
            elif deletion.mechanism not in BY_TYPE:
                fail(deletion.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        for upsertion in body.upsertions:
            mechanism = BY_TYPE.get(upsertion.mechanism)
            if not upsertion.name:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
            elif mechanism is None:
                fail(upsertion.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif upsertion.iterations < mechanism.min_iterations:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif upsertion.iterations > mechanism.max_iterations:
                fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        pairs = Counter((entry.name, entry.mechanism) for entry in [*body.deletions, *body.upsertions]
                        if entry.name not in errors)
        for (user, _), count in pairs.items():
            if count > 1:
                fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same "
                                                         "request")
        try:
            # A store shared by the cluster's brokers is read afresh for the users deleted here.
            await self.credentials.refresh(d.name for d in body.deletions if d.name not in errors)
        except OSError as exc:
            self.log.warn("Could not refresh SCRAM credentials: {error}", error=exc)
        for deletion in body.deletions:
            if deletion.name in errors:
                continue
            if self.credentials.get(deletion.name, BY_TYPE[deletion.mechanism].name) is None:
                fail(deletion.name, ErrorCode.RESOURCE_NOT_FOUND,
                     "Attempt to delete a user credential that does not exist")

        deletions = [(d.name, BY_TYPE[d.mechanism].name) for d in body.deletions if d.name not in errors]
        upsertions = []
        for u in body.upsertions:
            if u.name not in errors:
                mechanism = BY_TYPE[u.mechanism]
                upsertions.append((u.name, mechanism.name,
                                   credential_from_salted_password(mechanism, u.salt, u.salted_password,
                                                                   u.iterations)))
        altered = list(dict.fromkeys([name for name, _ in deletions] + [name for name, _, _ in upsertions]))
        if altered:
            try:
                await self.credentials.alter(upsertions, deletions)
            except OSError as exc:
                self.log.error("Could not store SCRAM credentials for {users}: {error}", users=altered, error=exc)
                for user in altered:
                    fail(user, ErrorCode.UNKNOWN_SERVER_ERROR, f"The credentials could not be stored: {exc}")
            else:
                self.log.info("SCRAM credentials altered for {users} by {principal}", users=altered,
                              principal=request.principal)
        users_in_order = list(dict.fromkeys(entry.name for entry in [*body.deletions, *body.upsertions]))
        results = [AlterR.AlterUserScramCredentialsResult(
                       user=user, error_code=errors[user][0] if user in errors else ErrorCode.NONE,
                       error_message=errors[user][1] if user in errors else None)
                   for user in users_in_order]
        return AlterR(throttle_time_ms=0, results=results)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        users = dict.fromkeys(entry.name for entry in [*request.body.deletions, *request.body.upsertions])
        return AlterR(throttle_time_ms=0, results=[
            AlterR.AlterUserScramCredentialsResult(user=user, error_code=error, error_message=message)
            for user in users])
