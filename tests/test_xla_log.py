"""XLA's "Very slow compile?" banner is kept off stderr, and nothing else is."""

import subprocess
import sys
import textwrap

from lumaxlike._compat.xla_log import BannerFilter

# XLA's slow-operation alarm as it logs it (xla/service/slow_operation_alarm.cc)
BANNER = (
    b"E1203 21:40:00.123456   1234 slow_operation_alarm.cc:140] \n"
    b"********************************\n"
    b"[Compiling module jit_sample_block] Very slow compile? If you want to file a bug, run "
    b"with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.\n"
    b"********************************\n"
)


def filtered(*chunks: bytes) -> bytes:
    out = []
    banner = BannerFilter(out.append)
    for chunk in chunks:
        banner.feed(chunk)
    banner.close()
    return b"".join(out)


def test_the_banner_goes_and_everything_else_stays_in_order():
    before = b"lumaxlike: reading\n"
    bar = b"\rsampling: 10%\rsampling: 20%"
    after = b"E1203 other.cc:1] another error\n******\nlast line without newline"
    assert filtered(before + BANNER + after) == before + after
    # whatever the chunks: split inside the banner's lines
    stream = before + BANNER + bar + BANNER + after
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]
    assert filtered(*pieces) == before + bar + after
    # a progress bar's redraw (carriage return, no newline) is passed on at once
    out = []
    banner = BannerFilter(out.append)
    banner.feed(b"sampling: 10%\rsampling: 20%\r")
    assert b"".join(out) == b"sampling: 10%\rsampling: 20%\r"


def test_descriptor_2_is_filtered_while_active_and_restored_after():
    code = textwrap.dedent(
        f"""
        import os, sys
        from lumaxlike._compat.xla_log import without_slow_compile_banner
        sys.stderr.write("python before\\n")
        with without_slow_compile_banner():
            os.write(2, {BANNER!r})  # as C++ writes it: straight to descriptor 2
            sys.stderr.write("python inside\\n")
            os.write(2, b"c++ inside\\n")
        os.write(2, {BANNER!r})  # after: not filtered
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"python before\npython inside\nc++ inside\n" + BANNER
