from bench.machine import cpu_model, memory_gib, os_name


def test_cpu_model_is_the_first_model_name() -> None:
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n\nprocessor\t: 1\nmodel name\t: other\n"
    assert cpu_model(cpuinfo) == "AMD EPYC 9R14"


def test_memory_is_mem_total_in_gib() -> None:
    assert memory_gib("MemTotal:       24576000 kB\nMemFree:  1 kB\n") == 23.4
    assert memory_gib("") == 0.0


def test_os_name_is_the_pretty_name() -> None:
    assert (
        os_name('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
        == "Debian GNU/Linux 12 (bookworm)"
    )
