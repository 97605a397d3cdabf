package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CPU accounting of a measurement: this process, the Postgres backends
// serving the measurement's database, and Redis. Wall-clock rates on a
// shared machine move with the other tenants' load; the CPU a task costs
// moves much less, so it is reported next to each throughput.

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

type cpuSnapshot struct {
	self     time.Duration
	backends map[int]time.Duration
	redis    time.Duration
}

// cpuUsage is CPU used between two snapshots.
type cpuUsage struct {
	Self, Postgres, Redis time.Duration
}

func (u cpuUsage) total() time.Duration { return u.Self + u.Postgres + u.Redis }

func (r *runner) cpuSnapshot(ctx context.Context, pool *pgxpool.Pool) (cpuSnapshot, error) {
	s := cpuSnapshot{backends: map[int]time.Duration{}}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s, err
	}
	s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return s, err
		}
		if t, err := procCPU(pid); err == nil {
			s.backends[pid] = t
		}
	}
	if err := rows.Err(); err != nil {
		return s, err
	}
	if info, err := r.rdb.Info(ctx, "cpu").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
				f, _ := strconv.ParseFloat(v, 64)
				s.redis += time.Duration(f * float64(time.Second))
			}
		}
	}
	return s, nil
}

// since is the CPU used from before to s. Backends that appeared meanwhile
// count from zero; backends that went away are lost (pools keep their
// connections during a measurement).
func (s cpuSnapshot) since(before cpuSnapshot) cpuUsage {
	u := cpuUsage{Self: s.self - before.self, Redis: s.redis - before.redis}
	for pid, t := range s.backends {
		u.Postgres += t - before.backends[pid]
	}
	return u
}

// procCPU is a process's user and system CPU time.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command may contain spaces; fields resume after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * clockTick, nil
}
