package RedisServer;

# A real redis-server for the cluster tests: started on a free loopback
# port (and a unix socket) in the test's directory, no persistence,
# stopped (SIGTERM, then SIGKILL) by stop() and on DESTROY.  start() after
# stop() comes back on the same port, empty, like a restarted cache.
#
# Also cluster_node(): a second (third...) OmniTest instance whose prefix
# lives inside the first one's, so that two nginx "nodes" run side by side
# in one test file.  Core Perl only.

use strict;
use warnings;

use File::Path qw(make_path);
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

our $BINARY = $ENV{TEST_REDIS_BINARY} || '/usr/sbin/redis-server';
$BINARY = '/usr/bin/redis-server' unless -x $BINARY;

sub new {
    my ($class, $t, %opt) = @_;

    # name: a second (third...) server of the test, in a directory and on
    # a port of its own; user: an ACL user (AUTH user password), the
    # default user then off; args: more redis-server arguments; sentinel:
    # { master => NAME, port => the master's port }: a redis-sentinel
    my $name = $opt{name} // 'redis';

    my $self = bless {
        t => $t,
        dir => $t->dir . "/$name",
        port => $t->port($name),
        password => $opt{password},
        user => $opt{user},
        args => $opt{args} || [],
        sentinel => $opt{sentinel},
    }, $class;

    make_path($self->{dir});
    $self->{socket} = "$self->{dir}/redis.sock";

    return $self;
}

sub port { $_[0]{port} }
sub socket_path { $_[0]{socket} }
sub addr { '127.0.0.1:' . $_[0]{port} }

sub available { -x $BINARY }

our $SENTINEL = -x '/usr/bin/redis-sentinel' ? '/usr/bin/redis-sentinel'
                                             : '/usr/sbin/redis-sentinel';

sub sentinel_available { -x $SENTINEL }

sub start {
    my ($self) = @_;

    return $self if $self->{pid};

    my @args;

    if (my $sn = $self->{sentinel}) {
        # a sentinel rewrites its configuration file: one of its own
        my $conf = "$self->{dir}/sentinel.conf";
        open my $fh, '>', $conf or die "$conf: $!";
        print $fh "port $self->{port}\nbind 127.0.0.1\n"
            . "dir $self->{dir}\nlogfile $self->{dir}/redis.log\n"
            . "sentinel monitor $sn->{master} 127.0.0.1 $sn->{port} 1\n"
            . "sentinel down-after-milliseconds $sn->{master} 1000\n"
            . "sentinel failover-timeout $sn->{master} 10000\n"
            . "sentinel parallel-syncs $sn->{master} 1\n";
        close $fh;
        @args = ($SENTINEL, $conf);

    } else {
        @args = ($BINARY, '--port', $self->{port}, '--bind', '127.0.0.1',
            '--unixsocket', $self->{socket}, '--unixsocketperm', '777',
            '--save', '', '--appendonly', 'no', '--dir', $self->{dir},
            '--logfile', "$self->{dir}/redis.log", '--daemonize', 'no',
            '--databases', '16', '--maxclients', '1000');

        if ($self->{user}) {
            push @args, '--user', 'default', 'off',
                '--user', $self->{user}, 'on', ">$self->{password}", '~*',
                '&*', '+@all';
        } elsif ($self->{password}) {
            push @args, '--requirepass', $self->{password};
        }

        push @args, @{$self->{args}};
    }

    my $pid = fork;
    die "fork: $!" unless defined $pid;

    if ($pid == 0) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        exec @args or POSIX::_exit(127);
    }

    $self->{pid} = $pid;

    for (1 .. 200) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$self->{port}");
        if ($s) {
            close $s;
            return $self;
        }
        sleep(0.025);
    }

    die "redis-server did not start on port $self->{port}";
}

sub stop {
    my ($self, $signal) = @_;

    my $pid = delete $self->{pid} or return;

    kill $signal || 'TERM', $pid;

    for (1 .. 200) {
        return if waitpid($pid, WNOHANG) == $pid;
        sleep(0.025);
    }

    kill 'KILL', $pid;
    waitpid($pid, 0);
}

# freeze / thaw: a Redis that accepts connections but never answers
sub pause { kill 'STOP', $_[0]{pid} if $_[0]{pid} }
sub resume { kill 'CONT', $_[0]{pid} if $_[0]{pid} }

# one command over RESP; returns the decoded reply (arrays as arrayrefs,
# errors as "ERR: ..." strings)
sub cmd {
    my ($self, @args) = @_;
    return $self->cmd_in(undef, @args);
}

# the same in database $db
sub cmd_in {
    my ($self, $db, @args) = @_;

    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$self->{port}",
                                  Timeout => 2) or return undef;

    if ($self->{password}) {
        print $s resp('AUTH', ($self->{user} ? $self->{user} : ()),
                      $self->{password});
        read_reply($s);
    }

    if (defined $db) {
        print $s resp('SELECT', $db);
        read_reply($s);
    }

    print $s resp(@args);
    my $r = read_reply($s);
    close $s;
    return $r;
}

# redis-cli -x: the command with $data as its last argument, from stdin
# (binary values and messages as they are); returns what redis-cli printed
sub cli_x {
    my ($self, $data, @args) = @_;

    my $cli = -x '/usr/bin/redis-cli' ? '/usr/bin/redis-cli' : 'redis-cli';
    my $in = "$self->{dir}/cli.in";

    open my $w, '>:raw', $in or die "$in: $!";
    print $w $data;
    close $w;

    my @auth = $self->{password}
        ? (($self->{user} ? ('--user', $self->{user}) : ()),
           '-a', $self->{password}, '--no-auth-warning') : ();

    my $pid = open(my $fh, '-|') // die "fork: $!";

    if ($pid == 0) {
        open STDIN, '<', $in or POSIX::_exit(127);
        open STDERR, '>&', \*STDOUT;
        exec $cli, '-p', $self->{port}, @auth, '-x', @args
            or POSIX::_exit(127);
    }

    my $out = do { local $/; <$fh> } // '';
    close $fh;
    $out =~ s/\s+\z//;
    return $out;
}

sub resp {
    my (@args) = @_;
    my $out = '*' . scalar(@args) . "\r\n";
    $out .= '$' . length($_) . "\r\n$_\r\n" for @args;
    return $out;
}

sub read_line {
    my ($s) = @_;
    my $line = '';
    while (1) {
        my $c;
        my $n = sysread($s, $c, 1);
        return undef unless $n;
        $line .= $c;
        last if $line =~ /\r\n$/;
    }
    $line =~ s/\r\n$//;
    return $line;
}

sub read_reply {
    my ($s) = @_;

    my $line = read_line($s);
    return undef unless defined $line;

    my ($type, $rest) = (substr($line, 0, 1), substr($line, 1));

    return $rest if $type eq '+';
    return "ERR: $rest" if $type eq '-';
    return $rest + 0 if $type eq ':';

    if ($type eq '$') {
        return undef if $rest < 0;
        my $data = '';
        while (length($data) < $rest + 2) {
            my $n = sysread($s, $data, $rest + 2 - length($data),
                            length $data);
            return undef unless $n;
        }
        return substr($data, 0, $rest);
    }

    if ($type eq '*') {
        return undef if $rest < 0;
        return [map { read_reply($s) } 1 .. $rest];
    }

    return undef;
}

# every key matching a pattern (SCAN)
sub keys {
    my ($self, $pattern) = @_;
    my ($cursor, @keys) = ('0');
    do {
        my $r = $self->cmd('SCAN', $cursor, 'MATCH', $pattern, 'COUNT', 1000);
        return () unless ref $r;
        $cursor = $r->[0];
        push @keys, @{$r->[1]};
    } while ($cursor ne '0');
    return @keys;
}

sub DESTROY {
    my ($self) = @_;
    local $?;
    $self->stop;
}

###########################################################################
# a second nginx node in the same test

sub cluster_node {
    my ($t, $name) = @_;

    my $n = bless { %$t }, ref $t;

    $n->{dir} = $t->dir . "/node-$name";
    $n->{ports} = {};
    $n->{mocks} = [];
    $n->{started} = 0;

    make_path("$n->{dir}/logs", "$n->{dir}/tmp");

    return $n;
}

# worker pids of a node (children of its master)
sub worker_pids {
    my ($t) = @_;
    my $master = $t->master_pid or return ();
    my @pids;
    opendir(my $d, '/proc') or return ();
    for my $p (grep { /^\d+$/ } readdir $d) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $stat = <$fh>;
        close $fh;
        next unless $stat;
        my ($ppid) = $stat =~ /^\d+ \(.*?\) \S+ (\d+)/;
        push @pids, $p if defined $ppid && $ppid == $master;
    }
    closedir $d;
    return sort { $a <=> $b } @pids;
}

sub fd_count {
    my ($pid) = @_;
    opendir(my $d, "/proc/$pid/fd") or return -1;
    my $n = grep { /^\d+$/ } readdir $d;
    closedir $d;
    return $n;
}

1;
