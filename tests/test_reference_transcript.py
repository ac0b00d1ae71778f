"""What a host keeps of its list when an attempt hands one back (`appended_meanwhile`)."""

from __future__ import annotations

from reference.transcript import Message, appended_meanwhile, new_message, stamp


def saved(text: str, row: int) -> Message:
    message = new_message("user", text, 0.0)
    stamp([message], [row])
    return message


def test_a_turn_keeps_what_it_appended_after_the_copy_unsaved_or_saved_after_the_commit():
    copied, before_commit = saved("copied by the attempt", 3), saved("saved before the commit, carried by it", 4)
    unsaved, after_commit = new_message("user", "typed meanwhile, not saved yet", 0.0), saved("saved into the child", 9)
    handed = [saved("summary", 7), saved("tail", 8)]
    caller = [copied, before_commit, after_commit, unsaved]

    assert appended_meanwhile(caller, [copied], handed) == [after_commit, unsaved]


def test_against_a_list_with_no_saved_row_every_message_appended_after_the_copy_is_kept():
    first, second = saved("saved meanwhile", 2), new_message("assistant", "unsaved", 0.0)

    assert appended_meanwhile([first, second], [], [new_message("user", "unsaved copy", 0.0)]) == [first, second]
