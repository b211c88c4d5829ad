"""A messaging service: users with ids, a logged-in user, contacts and messages."""

from __future__ import annotations

import copy
from typing import Any

from arlkit.envs.tools.api_base import tool

__all__ = ["Messenger"]

MAX_MESSAGES = 500
MAX_MESSAGE_CHARS = 2000


class Messenger:
    """Send and read messages between registered users."""

    api_name = "Messenger"
    bfcl_names: tuple[str, ...] = ()
    description = "A messaging service. Log in with your user id before sending or reading messages."

    def __init__(self) -> None:
        self.users: dict[str, str] = {}  # user name -> user id
        self.current_user: str | None = None
        self.contacts: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.next_message_id = 1

    def load_state(self, config: dict[str, Any]) -> None:
        """Keys: ``users`` (name -> id), optional ``current_user``, ``contacts`` (names),
        ``messages`` (dicts with id, sender, receiver, text) and ``next_message_id``."""
        users = config.get("users", {})
        if not isinstance(users, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in users.items()):
            raise ValueError("Messenger: 'users' must map user names to user ids")
        self.users = dict(users)
        self.current_user = config.get("current_user")
        if self.current_user is not None and self.current_user not in self.users.values():
            raise ValueError(f"Messenger: current_user {self.current_user!r} is not a user id")
        self.contacts = [str(c) for c in config.get("contacts", [])]
        self.messages = copy.deepcopy(list(config.get("messages", [])))
        self.next_message_id = int(
            config.get("next_message_id", 1 + max((int(m["id"]) for m in self.messages), default=0))
        )

    def _name_of(self, user_id: str) -> str | None:
        return next((name for name, uid in self.users.items() if uid == user_id), None)

    def _login_required(self) -> dict[str, Any] | None:
        return None if self.current_user else {"error": "not logged in: call login(user_id) first"}

    @tool
    def login(self, user_id: str) -> dict[str, Any]:
        """Log in as a user.

        Args:
            user_id: the user's id, like 'USR001'.
        """
        if self._name_of(user_id) is None:
            return {"error": f"login: unknown user id {user_id!r}"}
        self.current_user = user_id
        return {"login_status": True, "user": self._name_of(user_id)}

    @tool
    def logout(self) -> dict[str, Any]:
        """Log out the current user."""
        if not self.current_user:
            return {"error": "logout: nobody is logged in"}
        self.current_user = None
        return {"logout_status": True}

    @tool
    def get_user_id(self, user: str) -> dict[str, Any]:
        """Look up the id of a user by name.

        Args:
            user: the user's name.
        """
        if user not in self.users:
            return {"error": f"get_user_id: no user named {user!r}"}
        return {"user_id": self.users[user]}

    @tool
    def add_contact(self, user_name: str) -> dict[str, Any]:
        """Add a user to the logged-in user's contacts.

        Args:
            user_name: the user's name.
        """
        if problem := self._login_required():
            return problem
        if user_name not in self.users:
            return {"error": f"add_contact: no user named {user_name!r}"}
        if user_name in self.contacts:
            return {"error": f"add_contact: {user_name!r} is already a contact"}
        self.contacts.append(user_name)
        return {"added_status": True, "user_id": self.users[user_name]}

    @tool
    def list_contacts(self) -> dict[str, Any]:
        """List the logged-in user's contacts."""
        if problem := self._login_required():
            return problem
        return {"contacts": list(self.contacts)}

    @tool
    def send_message(self, receiver_id: str, message: str) -> dict[str, Any]:
        """Send a message from the logged-in user.

        Args:
            receiver_id: the receiver's user id.
            message: the text.
        """
        if problem := self._login_required():
            return problem
        if self._name_of(receiver_id) is None:
            return {"error": f"send_message: unknown receiver id {receiver_id!r}"}
        if len(message) > MAX_MESSAGE_CHARS or len(self.messages) >= MAX_MESSAGES:
            return {"error": "send_message: message too long or mailbox full"}
        entry = {"id": self.next_message_id, "sender": self.current_user, "receiver": receiver_id, "text": message}
        self.messages.append(entry)
        self.next_message_id += 1
        return {"sent_status": True, "message_id": entry["id"]}

    @tool
    def view_messages_sent(self) -> dict[str, Any]:
        """The messages the logged-in user has sent, oldest first."""
        if problem := self._login_required():
            return problem
        return {"messages": [dict(m) for m in self.messages if m["sender"] == self.current_user]}

    @tool
    def view_inbox(self) -> dict[str, Any]:
        """The messages the logged-in user has received, oldest first."""
        if problem := self._login_required():
            return problem
        return {"messages": [dict(m) for m in self.messages if m["receiver"] == self.current_user]}

    @tool
    def delete_message(self, message_id: int) -> dict[str, Any]:
        """Delete a message the logged-in user sent.

        Args:
            message_id: id of the message.
        """
        if problem := self._login_required():
            return problem
        for i, m in enumerate(self.messages):
            if m["id"] == message_id and m["sender"] == self.current_user:
                del self.messages[i]
                return {"deleted_status": True, "message_id": message_id}
        return {"error": f"delete_message: you sent no message with id {message_id}"}

    @tool
    def search_messages(self, keyword: str) -> dict[str, Any]:
        """Messages sent or received by the logged-in user that contain a keyword (case-insensitive).

        Args:
            keyword: the text to look for.
        """
        if problem := self._login_required():
            return problem
        me, key = self.current_user, keyword.lower()
        return {
            "messages": [
                dict(m) for m in self.messages if me in (m["sender"], m["receiver"]) and key in str(m["text"]).lower()
            ]
        }
