package OmniTest;

# Integration-test harness for ngx_omniroute, in the style of nginx-tests:
# a temporary prefix per test file, free loopback ports, the distro nginx
# with load_module and 2 worker processes, raw HTTP clients (including one
# that reads a streamed response chunk by chunk), and an error.log check
# that fails the test on [alert], [emerg], [crit], crashed workers and
# sanitizer reports.  Core Perl only.

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname basename);
use File::Path qw(make_path remove_tree);
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use POSIX qw(WNOHANG);
use Socket qw(SOL_SOCKET SO_LINGER);
use Test::More;
use Time::HiRes qw(time sleep);

our $ROOT = abs_path(dirname(__FILE__) . '/../..');
our $NGINX = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
our $MODULE = $ENV{TEST_OMNIROUTE_MODULE}
    || "$ROOT/build/nginx/ngx_http_omniroute_module.so";

# the test build ("make test-build"): the same module with test-only
# handlers (omniroute_redis_debug); OmniTest->new(test_build => 1)
our $TEST_MODULE = $ENV{TEST_OMNIROUTE_TEST_MODULE}
    || "$ROOT/build/nginx-test/ngx_http_omniroute_module.so";

my %used_ports;

# A test dependency that is missing (redis-server, chromium, node and the
# SDKs, promtool, the shared fixtures...): skipped when a developer runs
# the tests by hand, a failure under CI=true, where the run must have
# installed everything (make test-deps).
sub ci { ($ENV{CI} // '') eq 'true' }

# the whole file needs it: plan skip_all, or one failed test under CI
sub need {
    my ($have, $why) = @_;

    return if $have;

    if (ci()) {
        plan(tests => 1);
        fail("$why (CI=true: a missing test dependency fails)");
        exit 1;
    }

    plan(skip_all => $why);
}

# a SKIP: { } block needs it: skip N tests, or one failure under CI
sub skip_without {
    my ($why, $n) = @_;

    if (ci()) {
        fail("$why (CI=true: a missing test dependency fails)");
        no warnings 'exiting';
        last SKIP;
    }

    skip($why, $n);
}

sub new {
    my ($class, %opt) = @_;

    my $name = basename($0, '.t');
    my $dir = "$ROOT/t/tmp/$name.$$";
    remove_tree($dir);
    make_path("$dir/logs", "$dir/tmp");

    my $module = $opt{test_build} ? $TEST_MODULE : $MODULE;

    if ($opt{test_build} && !-f $module) {
        BAIL_OUT("$module is missing: run \"make test-build\"");
    }

    my $self = bless {
        dir => $dir,
        ports => {},
        workers => $opt{workers} || 2,
        mocks => [],
        started => 0,
        module => $module,
    }, $class;

    return $self;
}

sub dir { $_[0]{dir} }

# the module .so this instance loads
sub module { $_[0]{module} }

# a free loopback TCP port, stable per name for this test file
sub port {
    my ($self, $n) = @_;

    return $self->{ports}{$n} if $self->{ports}{$n};

    for (1 .. 100) {
        my $s = IO::Socket::INET->new(
            LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1,
            ReuseAddr => 0, Proto => 'tcp') or next;
        my $p = $s->sockport;
        close $s;
        next if $used_ports{$p}++;
        return $self->{ports}{$n} = $p;
    }

    die "no free port";
}

sub write_file {
    my ($self, $name, $content) = @_;
    my $path = $name =~ m{^/} ? $name : "$self->{dir}/$name";
    open my $fh, '>', $path or die "$path: $!";
    print $fh $content;
    close $fh;
    return $path;
}

# the usual gateway: omniroute_pass on /v1/ of port "gw", and the attempt
# location with omniroute_params
our $GATEWAY = <<'END';
server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
END

# %%GATEWAY%%, %%PORT_name%%, %%TESTDIR%%, %%MODULE%% and %%PARAMS%% are
# expanded
sub expand {
    my ($self, $text) = @_;
    $text =~ s/%%GATEWAY%%\n?/$GATEWAY/g;
    $text =~ s/%%PORT_(\w+)%%/$self->port($1)/ge;
    $text =~ s/%%TESTDIR%%/$self->{dir}/g;
    $text =~ s/%%MODULE%%/$self->{module}/g;
    # "include %%PARAMS%%;" followed by its own proxy_*_timeout: a copy of
    # omniroute_params with those values (nginx refuses them twice)
    my $n = 0;
    $text =~ s{include\s+%%PARAMS%%;((?:\s*proxy_(?:read|send|connect)_timeout\s+[^;]+;)+)}{
        my $set = $1;
        my %set = $set =~ /(proxy_\w+_timeout)\s+([^;]+);/g;
        my $file = $self->params_with('params-auto-' . $n++, %set);
        "include $file;";
    }ge;
    $text =~ s/%%PARAMS%%/$ROOT\/conf.d\/omniroute_params/g;
    return $text;
}

# a copy of omniroute_params named $name in the test directory, with the
# given directives set to other values (nginx refuses a directive twice in
# one location, so a test that needs a short proxy_read_timeout uses
# this); include it as %%TESTDIR%%/$name
sub params_with {
    my ($self, $name, %set) = @_;

    open my $fh, '<', "$ROOT/conf.d/omniroute_params" or die $!;
    my $text = do { local $/; <$fh> };
    close $fh;

    for my $d (sort keys %set) {
        $text =~ s/^(\Q$d\E\s+)[^;]*;/$1$set{$d};/m
            or $text .= "$d $set{$d};\n";
    }

    return $self->write_file($name, $text);
}

# the http {} body of a test configuration; the harness adds the rest
# (module => PATH: load that .so instead of this instance's)
sub config {
    my ($self, $http, %opt) = @_;

    my $d = $self->{dir};
    my $w = $opt{workers} || $self->{workers};
    my $main = $opt{main} || '';
    my $module = $opt{module} || $self->{module};

    # a master started as root would run its workers as nobody, who may
    # not reach a checkout under /root or a 0700 directory: the workers
    # run as the user who runs the tests
    my $user = $> == 0 ? 'user root;' : '';

    my $conf = <<"EOF";
load_module $module;
$user
worker_processes $w;
error_log $d/logs/error.log info;
pid $d/nginx.pid;
$main

events {
    worker_connections 1024;
}

http {
    access_log $d/logs/access.log;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;

$http
}
EOF

    $self->write_file('nginx.conf', $self->expand($conf));
    return $self;
}

# nginx -t; returns (exit code, combined output)
sub test_config {
    my ($self) = @_;
    my $d = $self->{dir};
    my $out = `$NGINX -p $d/ -c $d/nginx.conf -e $d/logs/config-test.log -t 2>&1`;
    return ($? >> 8, $out);
}

sub run {
    my ($self, @wait_ports) = @_;
    my $d = $self->{dir};

    my $out = `$NGINX -p $d/ -c $d/nginx.conf -e $d/logs/error.log 2>&1`;
    if ($? != 0) {
        BAIL_OUT("nginx failed to start: $out");
    }

    $self->{started} = 1;

    for my $p (@wait_ports) {
        $self->wait_port($p) or BAIL_OUT("nginx is not listening on $p");
    }

    return $self;
}

sub reload {
    my ($self) = @_;
    my $d = $self->{dir};
    my $pid = $self->master_pid;
    kill 'HUP', $pid;
    # the new workers are started when the master logs "start worker"
    sleep(0.5);
    return $self;
}

sub master_pid {
    my ($self) = @_;
    open my $fh, '<', "$self->{dir}/nginx.pid" or return undef;
    my $pid = <$fh>;
    chomp $pid;
    return $pid;
}

sub wait_port {
    my ($self, $port) = @_;
    for (1 .. 100) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port");
        return 1 if $s;
        sleep(0.05);
    }
    return 0;
}

# stop and start nginx again: fresh shared state, same mocks
sub restart {
    my ($self, @wait_ports) = @_;
    $self->stop_nginx;
    return $self->run(@wait_ports);
}

sub stop {
    my ($self) = @_;
    $self->stop_nginx;
    # at global destruction a mock may be gone before this object
    $_->stop for grep { defined } @{$self->{mocks} || []};
    $self->{mocks} = [];
}

sub stop_nginx {
    my ($self) = @_;

    if ($self->{started}) {
        my $pid = $self->master_pid;
        if ($pid) {
            kill 'QUIT', $pid;
            for (1 .. 100) {
                last unless kill 0, $pid;
                sleep(0.05);
            }
            kill 'KILL', $pid if kill 0, $pid;
        }
        $self->{started} = 0;
    }
}

sub read_file {
    my ($self, $name) = @_;
    my $path = $name =~ m{^/} ? $name : "$self->{dir}/$name";
    open my $fh, '<', $path or return '';
    local $/;
    return scalar <$fh>;
}

sub error_log { $_[0]->read_file('logs/error.log') }

# fails on what must never appear in error.log (but lines matching
# $t->{allow_log}, a test's own deliberate condition)
sub check_error_log {
    my ($self) = @_;
    my $log = $self->error_log;
    my $allow = $self->{allow_log};
    my @bad = grep { /\[(alert|emerg|crit)\]|exited on signal|AddressSanitizer|runtime error:|LeakSanitizer/ }
        grep { !$allow || !/$allow/ } split /\n/, $log;
    ok(!@bad, 'error.log has no alert, emerg, crit, crash or sanitizer report')
        or diag(join("\n", @bad[0 .. ($#bad > 9 ? 9 : $#bad)]));
}

# stop nginx and the mocks, then check error.log; call at the end
sub done {
    my ($self) = @_;
    $self->stop;
    $self->check_error_log;
    remove_tree($self->{dir}) unless $ENV{TEST_NGINX_LEAVE};
}

sub DESTROY {
    my ($self) = @_;
    local $?;
    $self->stop;
}

###########################################################################
# HTTP clients

# one raw request; returns { status, headers (lowercase => value or
# arrayref when repeated), body (de-chunked), raw }
sub http {
    my ($self, $port, $raw, %opt) = @_;

    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  Timeout => 5)
        or return { status => 0, error => "connect: $!" };

    $s->autoflush(1);
    print $s $raw;

    my $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + ($opt{timeout} || 10);

    while (time < $deadline) {
        last unless $sel->can_read($deadline - time);
        my $n = sysread($s, $buf, 65536, length $buf);
        last unless $n;
    }

    close $s;
    return parse_response($buf);
}

sub parse_response {
    my ($buf) = @_;

    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    $head //= '';
    $body //= '';

    my @lines = split /\r\n/, $head;
    my $status_line = shift @lines // '';
    my ($status) = $status_line =~ m{^HTTP/\d\.\d (\d+)};

    my %h;
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $k = lc $k;
        if (exists $h{$k}) {
            $h{$k} = [ref $h{$k} ? @{$h{$k}} : $h{$k}, $v];
        } else {
            $h{$k} = $v;
        }
    }

    if (($h{'transfer-encoding'} // '') =~ /chunked/i) {
        $body = dechunk($body);
    }

    return { status => $status || 0, status_line => $status_line,
             headers => \%h, body => $body, raw => $buf };
}

sub dechunk {
    my ($in) = @_;
    my $out = '';
    while ($in =~ s/^([0-9a-fA-F]+)[^\r\n]*\r\n//) {
        my $len = hex $1;
        last if $len == 0;
        $out .= substr($in, 0, $len, '');
        $in =~ s/^\r\n//;
    }
    return $out;
}

sub request_text {
    my ($method, $path, $body, %headers) = @_;
    $body //= '';
    my $r = "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    my $has_len = 0;
    for my $k (sort keys %headers) {
        my @v = ref $headers{$k} ? @{$headers{$k}} : ($headers{$k});
        $r .= "$k: $_\r\n" for @v;
        $has_len = 1 if lc $k eq 'content-length' or lc $k eq 'transfer-encoding';
    }
    $r .= "Content-Length: " . length($body) . "\r\n"
        if !$has_len && ($method ne 'GET' || length $body);
    return "$r\r\n$body";
}

# POST a body (a string, or a hash/array encoded as JSON)
sub post {
    my ($self, $port, $path, $body, %headers) = @_;
    $body = encode_json($body) if ref $body;
    $headers{'Content-Type'} //= 'application/json';
    return $self->http($port, request_text('POST', $path, $body, %headers));
}

sub get {
    my ($self, $port, $path, %headers) = @_;
    return $self->http($port, request_text('GET', $path, undef, %headers));
}

# GET until $done->(body) is true or 10 s have passed, the last answer: for
# what the log phase counts (a request's tokens, its duration), which runs
# after the answer's last byte has been sent
sub get_until {
    my ($self, $port, $path, $done, %headers) = @_;
    my $deadline = time + 10;

    while (1) {
        my $r = $self->get($port, $path, %headers);
        return $r if $done->($r->{body} // '') || time >= $deadline;
        sleep(0.05);
    }
}

# POST and read the response incrementally: returns { parsed response,
# chunks => [[seconds since request, bytes], ...] }
sub post_stream {
    my ($self, $port, $path, $body, %headers) = @_;
    $body = encode_json($body) if ref $body;
    $headers{'Content-Type'} //= 'application/json';

    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  Timeout => 5) or die "connect: $!";
    $s->autoflush(1);

    my $t0 = time;
    print $s request_text('POST', $path, $body, %headers);

    my (@chunks, $buf);
    $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = $t0 + 20;

    while (time < $deadline) {
        last unless $sel->can_read($deadline - time);
        my $data = '';
        my $n = sysread($s, $data, 65536);
        last unless $n;
        push @chunks, [time - $t0, $data];
        $buf .= $data;
    }

    close $s;
    my $res = parse_response($buf);
    $res->{chunks} = \@chunks;
    $res->{total_time} = time - $t0;
    return $res;
}

# send a POST without waiting for the answer (for concurrent requests);
# read it later with finish()
sub start_post {
    my ($self, $port, $path, $body, %headers) = @_;
    $body = encode_json($body) if ref $body;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  Timeout => 5) or die "connect: $!";
    $s->autoflush(1);
    print $s request_text('POST', $path, $body, %headers);
    return $s;
}

# the parsed response of a start_post() socket
sub finish {
    my ($s, $timeout) = @_;
    my $buf = '';
    my $sel = IO::Select->new($s);
    while ($sel->can_read($timeout || 10)) {
        last unless sysread($s, $buf, 65536, length $buf);
    }
    close $s;
    return parse_response($buf);
}

sub json {
    my ($res) = @_;
    my $doc = eval { decode_json($res->{body}) };
    return $doc;
}

# POST DOC (as JSON) to an admin API PATH with a bearer TOKEN: the
# response, its body decoded in {json} ({} when it is not JSON)
sub api_post {
    my ($self, $port, $path, $doc, $token) = @_;
    my $r = $self->http($port, request_text('POST', $path, encode_json($doc),
        Authorization => "Bearer $token",
        'Content-Type' => 'application/json'));
    $r->{json} = eval { decode_json($r->{body}) } // {};
    return $r;
}

# the admin API's state of PROVIDER's first connection (GET
# /api/resilience/cooldowns?provider=PROVIDER with a bearer TOKEN): its
# status, last_error_type, last_status, retry_after_ms, failures...;
# undef when it has none; dies when the answer is not JSON
sub connection_state {
    my ($self, $port, $provider, $token) = @_;
    my $path = "/api/resilience/cooldowns?provider=$provider";
    my $r = $self->get($port, $path, Authorization => "Bearer $token");
    my $doc = json($r)
        or die "GET $path: not JSON: $r->{status} $r->{body}\n";
    return $doc->{connections}[0];
}

# the text of t/fixtures/streams/NAME.sse; with N, its first N events
# (each with its blank line), counted as MockProvider's fixture_events()
# counts them for fixture=NAME,cut=N (rst=N, stall=N...)
sub stream_fixture {
    my ($name, $n) = @_;

    my $path = "$ROOT/t/fixtures/streams/$name.sse";
    open my $fh, '<', $path or die "$path: $!";
    my $text = do { local $/; <$fh> };
    close $fh;

    return $text unless defined $n;

    my @ev = grep { /\S/ } split /(?<=\n\n)/, $text;
    return join '', @ev[0 .. $n - 1];
}

# a coding agent's request body of about KIB KiB naming MODEL
# (../shared/fixtures/agent_body.py), or undef without the fixtures
sub agent_body {
    my ($kib, $model) = @_;
    my $gen = "$ROOT/../shared/fixtures/agent_body.py";
    return undef unless -f $gen;
    my $body = `python3 $gen $kib MODEL`;
    return undef unless $? == 0 && $body =~ /"model": "MODEL"/;
    $body =~ s/"model": "MODEL"/"model": "$model"/;
    return $body;
}

###########################################################################
# mock providers

sub mock {
    my ($self, $name) = @_;
    require MockProvider;
    my $m = MockProvider->new(
        name => $name, port => $self->port("mock_$name"),
        log => "$self->{dir}/mock-$name.log",
        control => "$self->{dir}/mock-$name.behavior");
    $m->start;
    push @{$self->{mocks}}, $m;
    return $m;
}

# for each NAME => BEHAVIOR of KEYS (a hash ref), the key file key-NAME
# holding "sk-NAME~BEHAVIOR": the mock answers a request with that key
# by that behavior
sub key_files {
    my ($self, $keys) = @_;
    $self->write_file("key-$_", "sk-$_~$keys->{$_}\n") for keys %$keys;
    return $self;
}

# a provider and a connection named NAME for each NAME => BEHAVIOR of
# KEYS, all on the mock MOCK (url .../NAME), each with its key file
# (key_files): the config text, one "omniroute_provider NAME ...;" and
# one "omniroute_connection NAME provider=NAME ...;" line per key, in
# name order; params => { NAME => 'TEXT' } adds TEXT to NAME's
# omniroute_provider
sub providers_per_key {
    my ($self, $mock, $keys, %opt) = @_;
    my $params = $opt{params} || {};

    $self->key_files($keys);

    return join "\n", map {
        "    omniroute_provider $_ url=http://127.0.0.1:%%PORT_mock_$mock%%/$_"
        . (defined $params->{$_} ? " $params->{$_}" : '') . ";\n"
        . "    omniroute_connection $_ provider=$_ key_file=%%TESTDIR%%/key-$_;"
    } sort keys %$keys;
}

1;
